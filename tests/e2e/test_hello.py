"""The hello-world example end to end: real Airflow (dag.test) and real local Spark."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_provider_finegrained.cli.report import stage_results
from airflow_provider_finegrained.operators.links import SPARK_UI_KEY, SparkUILink
from tests.e2e.conftest import load_dag, run_xcoms

pytestmark = pytest.mark.slow


def test_hello_stages_runs_and_publishes(examples: Path) -> None:
    dag = load_dag(examples / "hello_stages.py", "hello_stages")
    run = dag.test()
    assert run.state == "success", [(ti.task_id, ti.state) for ti in run.get_task_instances()]
    _, results = stage_results("hello_stages", run.run_id)
    assert set(results) == {"numbers", "squares"}
    numbers, squares = results["numbers"], results["squares"]
    # squares read exactly what numbers committed, and sized itself from those bytes.
    assert squares["trace"]["consumed_bytes"] == {"numbers": numbers["output"]["total_bytes"]}
    assert squares["trace"]["rule"] == "bytes / avg_bytes_per_task"
    assert numbers["trace"]["rule"].startswith("source")
    # Every stage pushed the DAG's plan for the UI: both stages, their exchange and regions.
    plan = squares["plan"]
    assert plan == numbers["plan"] and set(plan["stages"]) == {"numbers", "squares"}
    assert [(e["producer"], e["consumer"]) for e in plan["exchanges"]] == [("numbers", "squares")]
    assert plan["stages"]["squares"]["region"] == squares["trace"]["region"]
    table = pq.read_table(squares["output"]["path"])
    assert table.num_rows == 10_000 == squares["output"]["rows"]
    assert sorted(table.column("square").to_pylist())[-1] == 9_999**2
    # Declarative resources: local mode asks for its one JVM of all threads and the driver memory.
    capacity = squares["trace"]["capacity"]
    assert capacity["outcome"] == "as_requested", capacity
    assert capacity["source"].startswith("capacity declared for local[")
    # Spark's own task report: local mode runs every task on the driver.
    tasks = squares["trace"]["spark_tasks"]
    assert tasks["executors"] == ["driver"]
    ran = [s for s in tasks["spark_stages"] if s["status"] == "COMPLETE"]
    assert ran and sum(s["per_executor"].get("driver", 0) for s in ran) == sum(s["tasks"] for s in ran)
    # The "Spark UI" link: the embedded default has no history server and the applications have ended when
    # the link is computed, with nothing keeping their UI: the link is empty, but each stage records its
    # own application (tests/operators/test_links.py has the run with a history server).
    targets = run_xcoms("hello_stages", run.run_id, SPARK_UI_KEY)
    links = run_xcoms("hello_stages", run.run_id, SparkUILink().xcom_key)
    assert set(targets) == set(links) == {"numbers", "squares"}
    ids = {t: v["application_id"] for t, v in targets.items()}
    assert all(i.startswith("local-") for i in ids.values()) and ids["numbers"] != ids["squares"]
    assert ids["squares"] == squares["trace"]["application_id"]
    assert all(v["history_url"] is None and v["cluster_app_url"] is None for v in targets.values())
    assert links == {"numbers": "", "squares": ""}
