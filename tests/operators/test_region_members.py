"""What each stage of a pipelined region runs with, read back from Spark and from its own task (issue 30).

One real run (``dag.test``, the embedded local Spark: one spark-submit) of a region of three stages
``a -> b -> c`` (pipelined), each with its own ``spark_conf``, is shared by the module's tests. Each stage
reads back from its session what it runs with, next to what a session no stage touched says
(``spark.newSession()``); ``c`` hands the three readings on as its committed output, at an
``output_path`` templated with its own task, task instance and params (the leader ``a`` renders it).
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.e2e.conftest import load_dag, run_xcoms, write_dag_file

pytestmark = pytest.mark.slow

DAG_ID = "region_members"

DAG_TEXT = """
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.dags.declaration import Input
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

KEYS = (
    "spark.sql.files.openCostInBytes",
    "spark.sql.session.timeZone",
    "spark.sql.ansi.enabled",
    "spark.sql.files.maxPartitionBytes",
    "spark.sql.shuffle.partitions",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes",
)


def readings(spark, stage):
    untouched = spark.newSession().conf
    rows = [(stage, key, spark.conf.get(key), untouched.get(key)) for key in KEYS]
    return spark.createDataFrame(rows, "stage string, key string, ran string, untouched string")


def a(spark):
    return readings(spark, "a")


def b(spark, rows):
    return rows.unionByName(readings(spark, "b"))


def c(spark, rows):
    return rows.unionByName(readings(spark, "c"))


with DAG(
    "region_members", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), params={"part": "dag"}
):
    first = Stage(
        task_id="a",
        python_callable=a,
        spark_conf={
            "spark.sql.files.openCostInBytes": "1234567",
            "spark.sql.session.timeZone": "Asia/Tokyo",
            "spark.sql.ansi.enabled": "false",
        },
    )
    second = Stage(
        task_id="b",
        python_callable=b,
        inputs={"rows": Input(first, mode="pipelined")},
        spark_conf={"spark.sql.session.timeZone": "America/Lima"},
    )
    Stage(
        task_id="c",
        python_callable=c,
        inputs={"rows": Input(second, mode="pipelined")},
        params={"part": "own"},
        output_path="exports/{{ dag.dag_id }}/{{ task.task_id }}-{{ ti.task_id }}-{{ params.part }}",
    )
"""


@pytest.fixture(scope="module")
def region_run(airflow_db: None) -> Iterator[tuple[str, Any]]:
    """The DAG's one run: its run id and its final state."""
    path = write_dag_file(f"{DAG_ID}.py", textwrap.dedent(DAG_TEXT))
    run = load_dag(path, DAG_ID).test()
    yield run.run_id, run.state


def _read_rows(output: dict[str, Any]) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = pq.read_table(Path(output["data_path"].removeprefix("file://"))).to_pylist()
    return rows


def test_stage_session_settings_do_not_leak_into_next_stage(region_run: tuple[str, Any]) -> None:
    run_id, state = region_run
    assert state == "success"
    traces = run_xcoms(DAG_ID, run_id, "finegrained_trace")
    rows = _read_rows(run_xcoms(DAG_ID, run_id, "finegrained_output")["c"])
    ran = {(r["stage"], r["key"]): r["ran"] for r in rows}
    assert ran[("a", "spark.sql.session.timeZone")] == "Asia/Tokyo"
    assert ran[("b", "spark.sql.session.timeZone")] == "America/Lima"
    assert ran[("a", "spark.sql.files.openCostInBytes")] == "1234567"
    # Each stage's trace states what its session ran with: its own settings, and for a key it does not
    # set, whatever a session no stage touched has (never what an earlier stage of the region set).
    for row in rows:
        stated = traces[row["stage"]]["spark_conf"].get(row["key"], row["untouched"])
        assert (row["stage"], row["key"], row["ran"]) == (row["stage"], row["key"], stated)


def test_region_members_render_templates_with_their_own_context(region_run: tuple[str, Any]) -> None:
    run_id, state = region_run
    assert state == "success"
    output = run_xcoms(DAG_ID, run_id, "finegrained_output")["c"]
    # Rendered by the leader 'a' for 'c': c's task, task instance and params (the DAG's "dag" overridden).
    assert output["path"].endswith(f"/exports/{DAG_ID}/c-c-own")
