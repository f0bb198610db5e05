"""The trial DAG (copied into the harness's DAGs folder): a slow stage, then a consumer; retries=1.

``slow_rows`` writes ROWS rows in PARTS files through a UDF that sleeps ROW_SLEEP seconds per row, so
its Spark job writes for a while (PARTS / 2 waves on local[2]) and a kill lands mid-write. ``consume``
reads the committed output and commits the same rows: its output's row count is what downstream read.
The harness rewrites the three constants below when it installs the file.
"""

from __future__ import annotations

from datetime import timedelta

import pendulum
from airflow.sdk import DAG, task

ROWS = 20
PARTS = 10
ROW_SLEEP = 2.0


@task.spark_stage(parallelism=PARTS)
def slow_rows(spark, rows: int = ROWS, parts: int = PARTS, row_sleep: float = ROW_SLEEP):  # type: ignore[no-untyped-def]
    import time

    from pyspark.sql import functions as F

    @F.udf("long")
    def slowly(value: int) -> int:
        time.sleep(row_sleep)
        return value

    return spark.range(0, rows, 1, parts).select(slowly("id").alias("n"))


@task.spark_stage(parallelism=1)
def consume(spark, rows):  # type: ignore[no-untyped-def]
    return rows.select("n")


with DAG(
    dag_id="kill_trial",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=2)},
    tags=["finegrained", "kill-trial"],
) as dag:
    consume(rows=slow_rows())  # type: ignore[call-arg, misc]
