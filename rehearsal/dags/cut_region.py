"""A region that runs long enough to lose its Airflow worker mid-way: the rehearsal's fault trials.

``slow_numbers`` (leader) waits ``params.hold_s`` seconds in its Spark driver before its job, so a
trial can cut the worker host while the application runs; ``evens`` follows it in memory. One DAG per
deploy mode (``cut_region_client``, ``cut_region_cluster``), each on its own connection, and
``cut_region_cluster_deferred`` whose leader waits for its application in the triggerer.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pendulum
from airflow.sdk import DAG, Param

from airflow_provider_finegrained.dags.declaration import Input
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage


def slow_numbers(spark, hold_s: str = "0"):  # type: ignore[no-untyped-def]
    time.sleep(float(hold_s))
    return spark.range(0, 100_000).selectExpr("id AS n", "id % 10 AS k")


def evens(spark, slow_numbers):  # type: ignore[no-untyped-def]
    return slow_numbers.where("n % 2 = 0")


for mode, deferred in (("client", False), ("cluster", False), ("cluster", True)):
    with DAG(
        dag_id=f"cut_region_{mode}" + ("_deferred" if deferred else ""),
        schedule=None,
        start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
        catchup=False,
        params={"hold_s": Param(60, type="integer")},
        default_args={"retries": 2, "retry_delay": timedelta(seconds=5)},
        tags=["finegrained", "rehearsal"],
    ):
        conn = "finegrained_spark_default" if mode == "client" else "finegrained_spark_cluster"
        first = Stage(
            task_id="slow_numbers",
            python_callable=slow_numbers,
            op_kwargs={"hold_s": "{{ params.hold_s }}"},
            finegrained_spark_conn_id=conn,
            deferrable=deferred,
        )
        Stage(
            task_id="evens",
            python_callable=evens,
            inputs={"slow_numbers": Input(first, mode="pipelined", distribution="forward")},
            finegrained_spark_conn_id=conn,
            deferrable=False,
        )
