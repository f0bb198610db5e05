"""The TPC-H example DAG end to end on the embedded default, checked against pyarrow's answers.

It runs warm, as the embedded default does for users (the cold path of this DAG is checked on the
standalone cluster, tests/cluster/test_pipeline_on_standalone.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_provider_finegrained.cli.report import stage_results
from tests.e2e.conftest import load_dag
from tests.tpch import reference

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def tpch_run(examples_module: Path, tpch_dir: Path, warm_pool_folder: str) -> tuple[Any, dict[str, dict[str, Any]]]:
    dag = load_dag(examples_module / "tpch_pipeline.py", "tpch_pipeline")
    run = dag.test(run_conf={"data_dir": str(tpch_dir)})
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert run.state == "success", states
    return run, stage_results("tpch_pipeline", run.run_id)[1]


def answer(results: dict[str, dict[str, Any]], stage: str) -> Any:
    return pq.read_table(results[stage]["output"]["path"])


def test_answers_match_an_independent_computation(tpch_run: Any, tpch_dir: Path) -> None:
    _, results = tpch_run
    reference.assert_same_answer(
        answer(results, "q1_pricing_summary"), reference.q1(tpch_dir), keys=["l_returnflag", "l_linestatus"], atol=1e-6
    )
    reference.assert_same_answer(
        answer(results, "q3_shipping_priority"),
        reference.q3(tpch_dir),
        keys=["l_orderkey", "o_orderdate", "o_shippriority"],
    )
    reference.assert_same_answer(answer(results, "q5_local_supplier_volume"), reference.q5(tpch_dir), keys=["n_name"])


def test_sources_are_sized_from_their_files_and_consumers_from_committed_bytes(tpch_run: Any, tpch_dir: Path) -> None:
    _, results = tpch_run
    lineitem = results["lineitem_projected"]
    assert lineitem["trace"]["consumed_bytes"] == {"lineitem": (tpch_dir / "lineitem.parquet").stat().st_size}
    q1 = results["q1_pricing_summary"]
    assert q1["trace"]["consumed_bytes"] == {"lineitem": lineitem["output"]["total_bytes"]}
    q5 = results["q5_join"]["trace"]
    assert q5["broadcast_inputs"] == ["nation_region"]
    assert q5["consumed_bytes"]["nation_region"] == results["nation_region"]["output"]["total_bytes"]


def test_pipelined_regions_run_as_one_application_with_memory_handover(tpch_run: Any) -> None:
    _, results = tpch_run
    for producer, consumer in (("q3_join", "q3_shipping_priority"), ("q5_join", "q5_local_supplier_volume")):
        p, c = results[producer], results[consumer]
        assert p["trace"]["region"] == c["trace"]["region"]
        assert p["trace"]["application_id"] == c["trace"]["application_id"] is not None
        assert p["output"]["in_memory_only"] is True  # nothing written between them
        assert c["trace"]["parallelism"] == p["trace"]["parallelism"]  # forward edge: one parallelism
        assert c["trace"]["rule"].startswith("forward edge")
    assert len({r["trace"]["region"] for r in results.values()}) == 6  # 8 stages in 6 regions
    # Warm, every region is a session of the one pool application.
    assert len({r["trace"]["application_id"] for r in results.values()}) == 1


def test_every_stage_ran_warm_in_a_session_of_its_own(tpch_run: Any) -> None:
    _, results = tpch_run
    assert {r["trace"]["execution"]["mode"] for r in results.values()} == {"warm"}
    assert len({r["trace"]["execution"]["session"] for r in results.values()}) == len(results) == 8


def test_explain_equals_the_run(tpch_run: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """``airflow finegrained explain --json`` decides every stage again from the run's record: per stage the
    same parallelism, decided parallelism, rule and Spark settings as its trace."""
    import json

    from airflow_provider_finegrained.cli.main import main

    run, results = tpch_run
    assert main(["explain", "tpch_pipeline", "--run-id", run.run_id, "--json"]) == 0
    stages = json.loads(capsys.readouterr().out)["stages"]
    assert set(stages) == set(results)
    for name, explained in stages.items():
        trace = results[name]["trace"]
        for key in ("parallelism", "decided_parallelism", "rule", "spark_conf"):
            assert explained[key] == trace[key], (name, key)
        assert explained["same_as_run"] is True
