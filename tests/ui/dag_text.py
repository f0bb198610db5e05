"""The small stage DAG the UI tests run: a source sized by a Param, a blocking exchange, a consumer."""

from __future__ import annotations

DAG_ID = "finegrained_ui_sizing"
DAG_FILE = "finegrained_ui_sizing.py"

DAG_TEXT = """
from __future__ import annotations

import pendulum
from airflow.sdk import DAG, Param, task


@task.spark_stage(parallelism=2)
def numbers(spark, rows):
    return spark.range(0, int(rows)).selectExpr("id AS n", "uuid() AS tag")


@task.spark_stage(max_parallelism=64)
def squares(spark, numbers):
    return numbers.selectExpr("n", "n * n AS square", "tag")


with DAG(
    dag_id="finegrained_ui_sizing",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    params={"rows": Param(1000, type="integer")},
    tags=["finegrained", "ui-test"],
) as dag:
    squares(numbers=numbers(rows="{{ params.rows }}"))
"""
