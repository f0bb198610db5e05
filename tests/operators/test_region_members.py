"""What each stage of a pipelined region runs with, read back from Spark and from its own task (issue 30).

One real run (``dag.test``, the embedded local Spark: one spark-submit) of a region of four stages
``a -> b -> c`` and ``a -> d`` (pipelined), three with their own ``spark_conf``, is shared by the module's
tests. Each stage reads back from its session what it runs with, next to what a session no stage touched says
(``spark.newSession()``); ``c`` and ``d`` commit the readings they were handed and their own, ``c`` at an
``output_path`` templated with its own task, task instance and params (the leader ``a`` renders it). Two more
regions, ``y`` (run after ``c``) and ``z`` (fed forward by ``c`` and ``y``), put one forward group over three
regions.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tests.e2e.conftest import load_dag, run_xcoms, write_dag_file

pytestmark = [pytest.mark.slow, pytest.mark.spark]

DAG_ID = "region_members"

DAG_TEXT = """
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.dags.declaration import Input
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

COUNT_FILE = "@COUNT_FILE@"
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


def counted(part):
    # Once per row each time Spark computes a's plan (one line per row, in the Python worker).
    with open(COUNT_FILE, "a") as out:
        out.write(part + "\\n")
    return part


def a(spark):
    from pyspark.sql import functions as F

    mark = F.udf(counted, "string")
    return readings(spark, "a").withColumn("stage", mark("stage"))


def b(spark, rows):
    return rows.unionByName(readings(spark, "b"))


def c(spark, rows):
    return rows.unionByName(readings(spark, "c"))


def d(spark, rows):
    return rows.unionByName(readings(spark, "d"))


def y(spark):
    return spark.range(0, 3).withColumnRenamed("id", "n")


def z(spark, made, late):
    return made.groupBy("stage").count().crossJoin(late)


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
    Stage(task_id="d", python_callable=d, inputs={"rows": Input(first, mode="pipelined")})
    third = Stage(
        task_id="c",
        python_callable=c,
        inputs={"rows": Input(second, mode="pipelined")},
        params={"part": "own"},
        output_path="exports/{{ dag.dag_id }}/{{ task.task_id }}-{{ ti.task_id }}-{{ params.part }}",
    )
    # One forward group {c, y, z} over three regions: c's region runs first (c >> y) and decides it.
    late = Stage(task_id="y", python_callable=y)
    third >> late
    forward = {"mode": "blocking", "distribution": "forward"}
    Stage(task_id="z", python_callable=z, max_parallelism=6,
          inputs={"made": Input(third, **forward), "late": Input(late, **forward)})
"""


@pytest.fixture(scope="module")
def count_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the UDF of ``a`` writes one line per row each time Spark computes ``a``'s plan."""
    return tmp_path_factory.mktemp("region-members") / "a-computed"


@pytest.fixture(scope="module")
def region_run(airflow_db: None, count_file: Path) -> Iterator[tuple[str, Any]]:
    """The DAG's one run: its run id and its final state."""
    path = write_dag_file(f"{DAG_ID}.py", textwrap.dedent(DAG_TEXT).replace("@COUNT_FILE@", str(count_file)))
    run = load_dag(path, DAG_ID).test()
    yield run.run_id, run.state


def _read_rows(output: dict[str, Any]) -> list[dict[str, str]]:
    rows: list[dict[str, str]] = pq.read_table(Path(output["data_path"].removeprefix("file://"))).to_pylist()
    return rows


def test_stage_session_settings_do_not_leak_into_next_stage(region_run: tuple[str, Any]) -> None:
    run_id, state = region_run
    assert state == "success"
    traces = run_xcoms(DAG_ID, run_id, "finegrained_trace")
    outputs = run_xcoms(DAG_ID, run_id, "finegrained_output")
    rows = _read_rows(outputs["c"]) + [r for r in _read_rows(outputs["d"]) if r["stage"] == "d"]
    assert {r["stage"] for r in rows} == {"a", "b", "c", "d"}
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


def test_lazy_handover_is_computed_once_per_reader_as_documented(region_run: tuple[str, Any], count_file: Path) -> None:
    """An in-memory handover that is not also written is not cached: its plan runs inside each reader's Spark
    jobs, with that reader's settings (docs/operators.md, "Pipelined regions"), and a's trace says so."""
    run_id, state = region_run
    assert state == "success"
    traces = run_xcoms(DAG_ID, run_id, "finegrained_trace")
    # b hands a on to c without a job of its own: a's plan runs in c's jobs and in d's.
    note = next(n for n in traces["a"]["sizing_notes"] if n.startswith("in-memory handover"))
    assert "'s Spark jobs (once per consumer: the handover is not cached)" in note
    assert "'c'" in note and "'d'" in note
    lines = count_file.read_text().splitlines()
    rows = 6  # a's readings: one row per key
    assert len(lines) == 2 * rows and set(lines) == {"a"}


def test_forward_group_over_regions_is_decided_once(region_run: tuple[str, Any]) -> None:
    """{c, y, z} is one forward group in three regions: c's (run first) decides it; y, in a region with no
    forward edge from c's, takes c's value from c's trace instead of deciding its own (a source: the group's
    max, 6), and z, fed forward by both, runs with it too. Spark ran each with that many shuffle partitions."""
    run_id, state = region_run
    assert state == "success"
    traces = run_xcoms(DAG_ID, run_id, "finegrained_trace")
    c, y, z = traces["c"], traces["y"], traces["z"]
    assert len({c["region"], y["region"], z["region"]}) == 3
    assert c["parallelism"] < 6  # c decides from its few bytes, within the group's [.., 6]
    assert y["rule"] == "forward group: same as 'c'"
    assert z["rule"] == "forward edge: same as 'c'"
    assert y["parallelism"] == z["parallelism"] == c["parallelism"]
    for trace in (y, z):
        assert trace["spark_conf"]["spark.sql.shuffle.partitions"] == str(c["parallelism"])


def test_explain_equals_the_run(region_run: tuple[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    """``airflow finegrained explain --json`` on this run (a region of four stages with their own settings, a
    forward group over three regions): per stage the same parallelism, decided parallelism, rule and Spark
    settings as its trace."""
    import json

    from airflow_provider_finegrained.cli.main import main

    run_id, state = region_run
    assert state == "success"
    traces = run_xcoms(DAG_ID, run_id, "finegrained_trace")
    assert main(["explain", DAG_ID, "--run-id", run_id, "--json"]) == 0
    stages = json.loads(capsys.readouterr().out)["stages"]
    assert set(stages) == set(traces) == {"a", "b", "c", "d", "y", "z"}
    for name, explained in stages.items():
        for key in ("parallelism", "decided_parallelism", "rule", "spark_conf"):
            assert explained[key] == traces[name][key], (name, key)
    assert stages["y"]["rule"] == "forward group: same as 'c'" and stages["z"]["rule"] == "forward edge: same as 'c'"
