"""A stage whose tasks run long enough to lose a Spark worker host under them (the rehearsal's node-loss trial).

Eight tasks, one row each, each sleeping ``params.task_s`` seconds in a Python UDF on its executor: on two
one-core workers that is four waves, so a worker lost after the first wave leaves tasks for Spark to retry
on the other.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param

from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage


def slow_rows(spark, task_s: str = "10"):  # type: ignore[no-untyped-def]
    import time

    from pyspark.sql import functions as F

    hold = float(task_s)

    @F.udf("long")
    def slowly(n):  # type: ignore[no-untyped-def]
        time.sleep(hold)
        return n * n

    return spark.range(0, 8, 1, 8).select(F.col("id").alias("n"), slowly("id").alias("square"))


with DAG(
    dag_id="lose_worker",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params={"task_s": Param(10, type="integer")},
    tags=["finegrained", "rehearsal"],
):
    Stage(task_id="slow_rows", python_callable=slow_rows, op_kwargs={"task_s": "{{ params.task_s }}"}, deferrable=False)
