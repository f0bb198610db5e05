"""One run of every variant at scale factor 0.01: the harness end to end on real Spark and Airflow."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.compare.__main__ import main
from bench.compare.pipeline import STAGES
from bench.compare.runners import warm_pool_processes
from tests.tpch import reference

pytestmark = pytest.mark.slow


@pytest.mark.timeout(3600)  # six variants, 31 Spark applications and three Airflow runs on a shared machine
def test_every_variant_runs_and_agrees(tmp_path: Path) -> None:
    results, work = tmp_path / "results", tmp_path / "work"
    argv = ["--scales", "0.01", "--repeats", "1", "--variants", "a", "b", "c", "d", "e", "oracle"]
    argv += ["--data", str(tmp_path / "data"), "--work", str(work), "--results", str(results)]
    argv += ["--image", str(tmp_path / "plot.png"), "--no-plan-scaling"]
    assert main(argv) == 0

    doc = json.loads((results / "compare-results.json").read_text())
    assert doc["smoke"] is True
    runs = {r["variant"]: r for r in doc["runs"]}
    assert set(runs) == {"a", "b", "c", "d", "e", "oracle"}
    for key, run in runs.items():
        assert run["ok"] and run["answers_identical"], (key, run.get("error"), run.get("answer_differences"))
        assert set(run["stages"]) == set(STAGES), key
        assert run["tasks"] > 0 and run["task_cpu_s"] > 0 and run["peak_rss_bytes"] > 0, key
    # One application per stage for the spark-submit baseline, one per region for the cold provider, one for the
    # oracle, and the warm pool's one (started by this run).
    assert {k: runs[k]["applications"] for k in runs} == {"a": 8, "b": 8, "c": 6, "d": 8, "e": 1, "oracle": 1}
    # Fixed sizing really runs Spark's 200 shuffle partitions (AQE off): Q1's aggregation alone has 200 tasks.
    assert runs["a"]["stages"]["q1_pricing_summary"]["tasks"] >= 200
    assert runs["b"]["stages"]["q1_pricing_summary"]["tasks"] < 200  # AQE coalesces them
    # The provider's own count of its stages' tasks agrees with the event logs.
    for stage, values in runs["c"]["stages"].items():
        assert values["tasks_from"] == "event log"
        assert values["trace_tasks"]["tasks"] <= values["tasks"], stage
    assert sum(v["tasks"] for v in runs["e"]["stages"].values()) <= runs["e"]["tasks"]
    assert warm_pool_processes(work / "airflow-home") == []  # the harness stopped the pool it started
    summary = doc["summary"]["0.01"]
    assert summary["a"]["wall_s_vs_a"] == 1.0 and summary["oracle"]["wall_s_vs_oracle"] == 1.0
    assert (results / "compare-summary.md").read_text().startswith("**Smoke run**")
    assert (tmp_path / "plot.png").read_bytes().startswith(b"\x89PNG")
    # And the answers are right, not only equal: the oracle's against pyarrow's.
    tables, out = tmp_path / "data" / "tpch-sf0.01", work / "sf0.01-oracle-1" / "out"
    reference.assert_same_answer(
        pq.read_table(out / "q1_pricing_summary"),
        reference.q1(tables),
        keys=["l_returnflag", "l_linestatus"],
        atol=1e-6,
    )
    reference.assert_same_answer(pq.read_table(out / "q5_local_supplier_volume"), reference.q5(tables), keys=["n_name"])
