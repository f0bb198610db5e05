"""A pipelined region whose members run on different Airflow workers, then a blocking stage after it.

``numbers`` leads the region on host B's queue; ``evens`` (forward, in memory) follows it on host C's
queue; ``totals`` reads the region's committed output in its own application on any worker. Nothing
passes between the hosts but XCom and the storage root.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_provider_finegrained.dags.declaration import Input
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage


def numbers(spark):  # type: ignore[no-untyped-def]
    return spark.range(0, 200_000).selectExpr("id AS n", "id % 10 AS k")


def evens(spark, numbers):  # type: ignore[no-untyped-def]
    return numbers.where("n % 2 = 0")


def totals(spark, evens):  # type: ignore[no-untyped-def]
    return evens.groupBy("k").agg({"n": "sum"}).withColumnRenamed("sum(n)", "total")


with DAG(
    dag_id="spread_region",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["finegrained", "rehearsal"],
):
    first = Stage(task_id="numbers", python_callable=numbers, queue="host_b")
    second = Stage(
        task_id="evens",
        python_callable=evens,
        inputs={"numbers": Input(first, mode="pipelined", distribution="forward")},
        queue="host_c",
    )
    Stage(task_id="totals", python_callable=totals, inputs={"evens": second}, queue="host_b")
