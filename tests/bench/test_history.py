"""The history benchmark's verdicts against an oracle sweep (no Spark): best, near-best and within 25%."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.history.__main__ import main
from bench.history.report import side_by_side
from bench.history.verdicts import swept, with_sweep, within
from bench.lib.pipeline import STAGES
from bench.lib.stats import slower_p_value
from bench.lib.sweep import best_partitions


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
    assert verdict == {
        "best": 2,
        "near_best": [1, 2],
        "best_s": pytest.approx(0.42),
        "median_s": {1: pytest.approx(0.40), 2: pytest.approx(0.42), 4: pytest.approx(0.60)},
        "near_best_rule": "within 5% of the fastest median",
    }
    # Without the sweep's own choice, the fastest median.
    assert swept("1", _sweep(tmp_path, times, {}))["q3_join"]["best"] == 1
    assert swept("0.1", path) == {} and swept("1", tmp_path / "missing.json") == {}


@pytest.mark.parametrize(
    ("parallelism", "best", "ok"),
    [(1, 1, True), (1, 2, False), (5, 4, True), (3, 4, True), (6, 4, False), (2, 1, False)],
)
def test_within_25_percent_of_the_best(parallelism: int, best: int, ok: bool) -> None:
    assert within(parallelism, best) is ok


def test_with_five_samples_near_best_is_a_test_not_a_margin(tmp_path: Path) -> None:
    # Fastest: 2 partitions (median 4.15). At 1 the median is 8% slower, but two samples beat all of 2's:
    # U = 15 of 25, p = 87/252 = 0.35 (see below), so 1 is near-best although the 5% margin would exclude it.
    # At 4 the median is only 3.6% slower, but every sample is slower than every one at 2 (U = 25,
    # p = 1/252), so 4 is not, although the 5% margin would keep it.
    times = {
        1: {"q1_pricing_summary": [3.9, 4.0, 4.5, 4.8, 5.0]},
        2: {"q1_pricing_summary": [4.1, 4.12, 4.15, 4.17, 4.2]},
        4: {"q1_pricing_summary": [4.21, 4.25, 4.3, 4.32, 4.4]},
    }
    verdict = swept("1", _sweep(tmp_path, times, {}))["q1_pricing_summary"]
    assert verdict["best"] == 2 and verdict["near_best"] == [1, 2]
    assert verdict["near_best_rule"].startswith("not slower than the fastest at p < 0.05")
    row = with_sweep({"parallelism": 1}, verdict)
    assert row["within_25pct_of_best"] is False and row["within_25pct_of_near_best"] is True
    assert row["time_vs_best"] == pytest.approx(4.5 / 4.15)
    # A count the sweep did not time has no price.
    assert with_sweep({"parallelism": 3}, verdict)["time_vs_best"] is None


@pytest.mark.parametrize(
    ("candidate", "best", "p"),
    [
        ([2, 3], [1], 1 / 3),  # splits {2,3}|{1}: U=2, {2,1}|{3}: U=0, {3,1}|{2}: U=1; one of three reaches 2
        ([1, 2, 3, 4, 5], [6, 7, 8, 9, 10], 1.0),  # faster everywhere: every split's U is >= 0
        ([6, 7, 8, 9, 10], [1, 2, 3, 4, 5], 1 / 252),  # slower everywhere: only the observed split has U = 25
        ([1, 1], [1], 1.0),  # all tied: U = 1 in every split
        # U = 15: the null counts of U = 0..10 for 5 against 5 are 1 1 2 3 5 7 9 11 14 16 18 (sum 87), and
        # by symmetry as many splits have U >= 15.
        ([3.9, 4.0, 4.5, 4.8, 5.0], [4.1, 4.12, 4.15, 4.17, 4.2], 87 / 252),
        # One tie (4.0 = 4.0) counts half: U = 1.5 + 5 + 5 + 5 + 5 = 21.5, reached by 8 of the 252 splits.
        ([4.0, 4.3, 4.44, 4.6, 4.9], [3.9, 4.0, 4.15, 4.2, 4.25], 8 / 252),
    ],
)
def test_slower_p_value_counts_every_split(candidate: list[float], best: list[float], p: float) -> None:
    assert slower_p_value(candidate, best) == pytest.approx(p)


def test_a_blocking_sweep_keeps_each_stages_own_best() -> None:
    # q3_join fastest at 1, its consumer at 4: fused, the producer takes the consumer's count; blocking, its own.
    times = {
        1: {"q3_join": [1.0], "q3_shipping_priority": [2.0]},
        4: {"q3_join": [1.5], "q3_shipping_priority": [1.0]},
    }
    assert best_partitions(times)["q3_join"] == 4
    assert best_partitions(times, fused=False)["q3_join"] == 1


def _run(number: int, variant: str, p: int, stage_s: float) -> dict[str, Any]:
    stage = {"stage": "q1_pricing_summary", "parallelism": p, "shuffling": True, "corrected": "on" in variant}
    stage |= {"spill_bytes": 0, "stage_s": stage_s, "swept_best": 2, "near_best": [1, 2], "time_vs_best": 1.05}
    stage |= {"within_25pct_of_best": p == 2, "within_25pct_of_near_best": True}
    return {"run": number, "scale": "1", "variant": variant, "stages": [stage]}


def test_side_by_side_takes_medians_over_alternated_runs() -> None:
    on, off = "history on, N=3", "history recorded, not applied (uncorrected)"
    # Run 1 learns (before the first uncorrected run: left out); run 3 still decided from bytes (2), so its
    # time is not the learned count's; then alternated pairs.
    runs = [_run(1, on, 2, 99.0), _run(2, off, 2, 5.0), _run(3, on, 2, 50.0), _run(4, on, 1, 4.0)]
    runs += [_run(5, off, 2, 7.0), _run(6, on, 1, 6.0), _run(7, off, 2, 6.0)]
    lines = side_by_side(runs)
    assert lines[0] == "## SF 1: history applied (runs 3, 4, 6) against uncorrected (runs 2, 5, 7)"
    row = lines[4].split(" | ")
    # P learned 1 (newest), uncorrected 2, near-best only, 1.05x the best's time, medians 5.00 and 6.00.
    assert row[2:7] == ["1", "2", "2 (1, 2)", "near-best only", "1.05x"]
    assert row[-1] == "5.00 / 6.00 |"


def test_report_only_against_a_sweep_of_some_stages_clears_the_others_verdicts(tmp_path: Path) -> None:
    stages = [
        {"stage": "q1_pricing_summary", "parallelism": 1, "swept_best": 4, "near_best": [4], "stage_s": 1.0},
        {"stage": "lineitem_projected", "parallelism": 4, "swept_best": 4, "near_best": [4], "stage_s": 1.0},
    ]
    for stage in stages:
        stage |= {"shuffling": True, "corrected": False, "learned_work": None, "learned_memory": None}
        stage |= {"consumed_bytes": 1, "shuffle_bytes": 1, "work_ratio": 1.0, "spill_bytes": 0}
    run = {"run": 1, "scale": "1", "variant": "history on", "pipeline_s": 1.0, "stages": stages}
    (tmp_path / "history.json").write_text(json.dumps({"command": "c", "min_runs": 3, "runs": [run]}))
    sweep = _sweep(tmp_path, {1: {"q1_pricing_summary": [1.0]}, 2: {"q1_pricing_summary": [2.0]}}, {})
    doc = json.loads(sweep.read_text())
    for times in doc["1"]["candidates"].values():  # this sweep timed Q1 only
        for stage in STAGES:
            if stage != "q1_pricing_summary":
                times.pop(stage)
    sweep.write_text(json.dumps(doc))
    assert main(["--report-only", "--results", str(tmp_path), "--sweep-file", str(sweep)]) == 0
    judged = {s["stage"]: s for s in json.loads((tmp_path / "history.json").read_text())["runs"][0]["stages"]}
    assert judged["q1_pricing_summary"]["swept_best"] == 1 and judged["q1_pricing_summary"]["time_vs_best"] == 1.0
    assert "swept_best" not in judged["lineitem_projected"]
