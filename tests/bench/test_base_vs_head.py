"""The no-regression check's bookkeeping (scripts/base_vs_head.py): the alternating order and the summary."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import base_vs_head


def test_rounds_alternate_which_commit_runs_first() -> None:
    assert base_vs_head.order(1) == ["base", "head"]
    assert base_vs_head.order(3) == ["base", "head", "head", "base", "base", "head"]


def test_the_summary_gives_each_commits_median_and_the_ratio() -> None:
    def run(label: str, cluster: float, standalone: float) -> dict[str, object]:
        return {"label": label, "standalone_cluster_s": cluster, "airflow_standalone_s": standalone}

    results = [run("base", 100.0, 30.0), run("head", 90.0, 36.0), run("head", 80.0, 34.0), run("base", 120.0, 32.0)]
    assert base_vs_head.summary(results) == [
        "standalone_cluster_s: base 110.0 s [100.0, 120.0], head 85.0 s [90.0, 80.0], head/base 0.77",
        "airflow_standalone_s: base 31.0 s [30.0, 32.0], head 35.0 s [36.0, 34.0], head/base 1.13",
    ]
