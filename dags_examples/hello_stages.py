"""The smallest pipeline: one stage feeding another.

``numbers`` writes a range of numbers; ``squares`` reads it (a blocking exchange: the output is
committed, measured and sized from) and squares it. Each stage is sized from the bytes it reads.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG, task


@task.spark_stage
def numbers(spark, count: int = 10_000):  # type: ignore[no-untyped-def]
    return spark.range(0, count).withColumnRenamed("id", "n")


@task.spark_stage(max_parallelism=8)
def squares(spark, numbers):  # type: ignore[no-untyped-def]
    return numbers.selectExpr("n", "n * n AS square")


with DAG(
    dag_id="hello_stages",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["finegrained", "example"],
) as dag:
    squares(numbers=numbers())
