"""A pipelined forward consumer never runs above its own max_parallelism, end to end on local Spark.

The reported case: a -> b pipelined forward with b.max_parallelism=8. The source 'a' takes the
connection's max_parallelism (128) as given; b used to inherit it. Now the forward group's bounds
([1, 8]) bound a's decision, and both run with 8 shuffle partitions.
"""

from __future__ import annotations

import pytest

from airflow_provider_finegrained.cli.report import stage_results
from tests.e2e.conftest import load_dag, write_dag_file

pytestmark = pytest.mark.slow

DAG_FILE = """
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.dags.declaration import Input
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage


def numbers(spark):
    return spark.range(0, 1000).withColumnRenamed("id", "n")


def buckets(spark, rows):
    return rows.groupBy((rows.n % 10).alias("bucket")).count()


with DAG("forward_bounds", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    a = Stage(task_id="a", python_callable=numbers)
    Stage(task_id="b", python_callable=buckets, max_parallelism=8,
          inputs={"rows": Input(a, mode="pipelined", distribution="forward")})
"""


def test_forward_consumer_runs_within_its_max_parallelism(airflow_db: None) -> None:
    path = write_dag_file("forward_bounds.py", DAG_FILE)
    run = load_dag(path, "forward_bounds").test()
    assert run.state == "success", [(ti.task_id, ti.state) for ti in run.get_task_instances()]
    _, results = stage_results("forward_bounds", run.run_id)
    a, b = results["a"]["trace"], results["b"]["trace"]
    assert a["region"] == b["region"]
    assert a["rule"] == "source: max_parallelism (no default set) (forward group bounds: max 8 from 'b')"
    assert b["rule"] == "forward edge: same as 'a'"
    assert (a["decided_parallelism"], a["parallelism"]) == (8, 8)
    assert (b["decided_parallelism"], b["parallelism"]) == (8, 8)
    # What Spark ran b's aggregation with.
    assert b["spark_conf"]["spark.sql.shuffle.partitions"] == "8"
    assert results["b"]["output"]["rows"] == 10
