"""Declared resources against a real ResourceManager: its nodes, its queues' headroom, its ApplicationMaster.

The session's cluster has two NodeManagers of 2 vcores and 4 GiB (8 GiB, 4 vcores in all), a ``default``
queue of 75% (3 vcores, 6 GiB) and a ``small`` queue of 25% (1 vcore, 2 GiB), a 256 MiB minimum allocation
and the Dominant Resource Calculator (cores count). Executors are 1 core, 1 GiB + 384 MiB (1.5 GiB as YARN
allocates); a client-mode ApplicationMaster is 1 core, 512 MiB + 384 MiB (1 GiB).
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest

from airflow_provider_finegrained.cli.report import stage_results
from airflow_provider_finegrained.spark.hadoop_cluster import HadoopCluster
from tests.conftest import DAGS_FOLDER
from tests.e2e.conftest import load_dag, write_dag_file
from tests.hadoop.test_yarn import applications, connection

pytestmark = [pytest.mark.slow, pytest.mark.hadoop]

DAG_TEXT = """
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

def wide(spark):
    return spark.range(0, 4000, 1, 4).selectExpr("id % 4 AS k").groupBy("k").count()

with DAG("{dag_id}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    Stage(task_id="wide", python_callable=wide, parallelism=4)
"""


def run_wide(dag_id: str) -> Any:
    write_dag_file(f"{dag_id}.py", textwrap.dedent(DAG_TEXT.format(dag_id=dag_id)))
    return load_dag(DAGS_FOLDER / f"{dag_id}.py", dag_id).test()


def test_a_region_runs_smaller_within_the_default_queue_and_beside_its_application_master(
    hadoop_cluster: HadoopCluster, airflow_db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 4 executors planned; the default queue has 3 vcores, of which the ApplicationMaster takes 1: 2 run.
    monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", connection(hadoop_cluster))
    run = run_wide("yarn_reduced")
    assert run.state == "success"
    results = stage_results("yarn_reduced", run.run_id)[1]
    capacity = results["wide"]["trace"]["capacity"]
    assert capacity["outcome"] == "reduced", capacity
    assert (
        "asked for 4 executor(s) of 1 core(s), 1.5 GiB plus a master container (ApplicationMaster or cluster-mode "
        "driver) of 1 core(s), 1.0 GiB" in (capacity["message"])
    )
    assert "2 fit" in capacity["message"] and "within queue default (3 core(s), 6.0 GiB headroom)" in capacity["source"]
    assert results["wide"]["trace"]["executors"] == 2
    apps = [a for a in applications(hadoop_cluster, "yarn_reduced") if run.run_id in a["name"]]
    assert [(a["queue"], a["finalStatus"]) for a in apps] == [("root.default", "SUCCEEDED")]


def test_a_queue_too_small_for_one_executor_fails_early_with_the_real_numbers(
    hadoop_cluster: HadoopCluster, airflow_db: None, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # The small queue's 1 vcore goes to the ApplicationMaster: no executor could start, so nothing is submitted.
    conn = connection(hadoop_cluster, capacity_wait_timeout=0, spark_conf={"spark.yarn.queue": "small"})
    monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", conn)
    run = run_wide("yarn_small_queue")
    assert run.state == "failed"
    assert {ti.task_id: ti.state for ti in run.get_task_instances()} == {"wide": "failed"}
    out = "".join(capfd.readouterr())
    assert "not enough free resources: asked for 4 executor(s) of 1 core(s), 1.5 GiB plus a master container" in out
    assert "within queue small (1 core(s), 2.0 GiB headroom)" in out
    assert applications(hadoop_cluster, "yarn_small_queue") == []  # failed before submitting anything
