"""A failed region, seen from its other stages: one clear message naming the stage that broke and the
leader, and no "XCom not found" errors from pulling results the leader never published (issue 17, item 6).

Real Airflow (``dag.test``) and real Spark (the embedded local default). The region's second stage runs
after its leader failed because its trigger rule says so; without one it would be ``upstream_failed``.
The leader asks to be ``deferrable``, which local mode ignores with a log line saying why.
"""

from __future__ import annotations

import textwrap

import pytest

from tests.e2e.conftest import load_dag, write_dag_file

pytestmark = [pytest.mark.slow, pytest.mark.spark]

DAG_TEXT = """
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.dags.declaration import Input
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage


def numbers(spark):
    return spark.range(10)


def breaks(spark, rows):
    raise ValueError("the second stage broke")


def last(spark, rows):
    return rows


with DAG("region_fails", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    first = Stage(task_id="first", python_callable=numbers, deferrable=True)
    second = Stage(task_id="second", python_callable=breaks, inputs={"rows": Input(first, mode="pipelined")},
                   trigger_rule="all_done")
    Stage(task_id="third", python_callable=last, inputs={"rows": Input(second, mode="pipelined")},
          trigger_rule="all_done")
"""


def test_the_other_stages_of_a_failed_region_name_the_stage_that_broke_and_the_leader(
    airflow_db: None, capfd: pytest.CaptureFixture[str]
) -> None:
    path = write_dag_file("region_fails.py", textwrap.dedent(DAG_TEXT))
    run = load_dag(path, "region_fails").test()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"first": "failed", "second": "failed", "third": "failed"}
    text = "".join(capfd.readouterr())
    assert "region region-1 failed in stage 'second': ValueError: the second stage broke" in text  # the leader
    for stage in ("second", "third"):
        assert (
            f"StageFailedError: stage {stage!r} did not run: it belongs to region region-1, whose Spark application "
            "is run by its leader 'first', and the region failed in stage 'second': ValueError: the second stage broke"
        ) in text
    assert "XCom not found" not in text
    # Local mode cannot defer: the driver is the task's child.
    assert (
        "Region region-1: deferrable=True has no effect here (the local launcher runs the driver as a child of the "
        "task); the task follows it"
    ) in text
