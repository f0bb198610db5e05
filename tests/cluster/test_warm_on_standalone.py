"""Warm mode on the real standalone cluster: regions run as sessions of one pool whose executors are on
the workers, with no application of their own; the pool leaves the cluster when it is stopped."""

from __future__ import annotations

import time

import pytest

from airflow_provider_finegrained.cli.report import stage_results
from airflow_provider_finegrained.spark.standalone import StandaloneCluster
from tests.cluster.test_pipeline_on_standalone import connection, our_apps
from tests.e2e.conftest import load_dag, write_dag_file

pytestmark = pytest.mark.slow

DAG = """
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

def numbers(spark):
    return spark.range(200_000).withColumnRenamed("id", "n")

def buckets(spark, numbers):
    return numbers.selectExpr("n % 97 AS bucket").groupBy("bucket").count()

with DAG("warm_cluster", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    n = Stage(task_id="numbers", python_callable=numbers)
    Stage(task_id="buckets", python_callable=buckets, inputs={"numbers": n})
"""


def pool_apps(cluster: StandaloneCluster) -> list[str]:
    return [a["id"] for a in cluster.status()["activeapps"] if a["name"] == "finegrained-warm-pool"]


def test_regions_run_warm_on_the_cluster_pool(
    standalone_cluster: StandaloneCluster, airflow_db: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow_provider_finegrained import warm
    from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook

    extra = {"warm_pool": "auto", "min_slots": 1, "max_slots": 2, "warm_idle_timeout": 600}
    monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", connection(standalone_cluster, **extra))
    folder = warm.auto_folder(FineGrainedSparkHook().get_settings())
    try:
        run = load_dag(write_dag_file("warm_cluster.py", DAG), "warm_cluster").test()
        assert {ti.task_id: ti.state for ti in run.get_task_instances()} == {
            "numbers": "success",
            "buckets": "success",
        }
        _, results = stage_results("warm_cluster", run.run_id)
        pools = pool_apps(standalone_cluster)
        assert len(pools) == 1, standalone_cluster.status()["activeapps"]
        assert our_apps(standalone_cluster, "warm_cluster") == []  # no application per region
        for stage in ("numbers", "buckets"):
            trace = results[stage]["trace"]
            assert trace["execution"]["mode"] == "warm"
            assert "up to 2 executor(s) of 1 core(s), 1.0 GiB" in trace["execution"]["reason"]
            assert trace["application_id"] == pools[0]
        tasks = results["buckets"]["trace"]["spark_tasks"]
        # The work ran on the workers' executors, not in the pool's driver.
        assert tasks["executors"] and "driver" not in tasks["executors"]
        assert set(tasks["executor_workers"].values()) <= {
            w["webuiaddress"].split("//")[1] for w in standalone_cluster.status()["workers"]
        }
        assert results["buckets"]["output"]["rows"] == 97
    finally:
        warm.stop(folder)
    deadline = time.monotonic() + 60
    while pool_apps(standalone_cluster):
        assert time.monotonic() < deadline, "the stopped pool is still an application of the cluster"
        time.sleep(1)
