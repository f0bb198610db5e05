"""The history benchmark's verdicts against an oracle sweep (no Spark): best, near-best and within 25%."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.compare.pipeline import STAGES
from bench.history import swept, within


def _sweep(tmp_path: Path, times: dict[int, dict[str, list[float]]], best: dict[str, int]) -> Path:
    path = tmp_path / "sweep.json"
    candidates = {str(p): {stage: t.get(stage, [10.0]) for stage in STAGES} for p, t in times.items()}
    path.write_text(json.dumps({"1": {"candidates": candidates, "best": best}}))
    return path


def test_swept_reads_the_given_file_and_takes_medians_of_repeats(tmp_path: Path) -> None:
    # q3_join: medians 0.40 at 1, 0.42 at 2 (within 5%: near-best), 0.60 at 4; the sweep chose 2 for the pair.
    times = {1: {"q3_join": [0.30, 0.40, 0.50]}, 2: {"q3_join": [0.42, 0.41, 0.90]}, 4: {"q3_join": [0.6, 0.6, 0.6]}}
    path = _sweep(tmp_path, times, {"q3_join": 2})
    verdict = swept("1", path)["q3_join"]
    assert verdict == {"best": 2, "near_best": [1, 2], "best_s": pytest.approx(0.42)}
    # Without the sweep's own choice, the fastest median.
    assert swept("1", _sweep(tmp_path, times, {}))["q3_join"]["best"] == 1
    assert swept("0.1", path) == {} and swept("1", tmp_path / "missing.json") == {}


@pytest.mark.parametrize(
    ("parallelism", "best", "ok"),
    [(1, 1, True), (1, 2, False), (5, 4, True), (3, 4, True), (6, 4, False), (2, 1, False)],
)
def test_within_25_percent_of_the_best(parallelism: int, best: int, ok: bool) -> None:
    assert within(parallelism, best) is ok
