"""The harness end to end on real Spark and Airflow at scale factor 0.01: its two runners (spark-submit of the
stage application, here the oracle's one application; the provider under `airflow dags test`, here warm).

Every variant at once (about 31 Spark applications, half an hour on this machine) is the manual smoke run:
`python -m bench compare --scales 0.01 --repeats 1 --smoke --variants a b c d e oracle`.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.compare.__main__ import main
from bench.lib.pipeline import STAGES
from bench.lib.provider import warm_folders, warm_pool_processes
from tests.tpch import reference

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.airflow]


@pytest.mark.timeout(1800)
def test_both_runners_run_and_agree(tmp_path: Path) -> None:
    results, work = tmp_path / "results", tmp_path / "work"
    argv = ["--scales", "0.01", "--repeats", "1", "--variants", "e", "oracle"]
    argv += ["--data", str(tmp_path / "data"), "--work", str(work), "--results", str(results)]
    argv += ["--image", str(tmp_path / "plot.png"), "--no-plan-scaling"]
    assert main(argv) == 0

    doc = json.loads((results / "compare-results.json").read_text())
    assert doc["smoke"] is True
    runs = {r["variant"]: r for r in doc["runs"]}
    assert set(runs) == {"e", "oracle"}
    for key, run in runs.items():
        assert run["ok"] and run["answers_identical"], (key, run.get("error"), run.get("answer_differences"))
        assert set(run["stages"]) == set(STAGES), key
        assert run["tasks"] > 0 and run["task_cpu_s"] > 0 and run["peak_rss_bytes"] > 0, key
    # One application for the oracle, and the warm pool's one (started before the runs, timed apart).
    assert {k: runs[k]["applications"] for k in runs} == {"e": 1, "oracle": 1}
    assert 0 < doc["warm_pool_start_s"] < 600
    assert "pipeline_s" in runs["e"] and 0 < runs["e"]["pipeline_s"] < runs["e"]["wall_s"]
    assert runs["oracle"]["pipeline_s"] == runs["oracle"]["wall_s"]
    assert sum(v["tasks"] for v in runs["e"]["stages"].values()) <= runs["e"]["tasks"]
    # The harness stopped the pool it started: looked for where the pool lived (an empty look proves nothing).
    assert any((folder / "server.log").is_file() for folder in warm_folders(work / "airflow-home"))
    assert warm_pool_processes(work / "airflow-home") == []
    summary = doc["summary"]["0.01"]
    assert summary["oracle"]["wall_s_vs_oracle"] == 1.0
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
