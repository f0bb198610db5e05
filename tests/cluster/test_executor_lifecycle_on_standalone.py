"""A region's application gives back the executors its narrower stage leaves idle (real standalone cluster).

The session's cluster (tests/cluster/conftest.py) has two workers of 2 cores and 4 GiB on 127.0.0.1; the
connection gives executors of 1 core, so a region of parallelism 4 may grow to four of them: one asked for
with the application (``executors_from="one_at_start"``), the others when its first job's tasks wait. The connection
shortens the idle timeouts to 8 s (the provider's 30 s would add over 20 s to the suite): the release is
Spark's, the settings and their report the provider's, and a connection's setting wins.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_provider_finegrained.cli.report import stage_results
from airflow_provider_finegrained.execution.executor_lifecycle import lifecycle_text
from airflow_provider_finegrained.spark.standalone import StandaloneCluster
from tests.e2e.conftest import load_dag, write_dag_file

pytestmark = pytest.mark.slow

IDLE_S = 8
WIDE_TASK_S = 6
"""How long each of the wide stage's four tasks runs: with milliseconds, the executor asked for with the
application ran all four before Spark asked for a second (in the suite, after tests/cluster/test_cluster_mode.py)."""
SLOW_TASK_S = IDLE_S + 22
"""How long the narrow stage's one task runs: past the idle timeout, with room for a loaded machine (the
driver's kill of an executor took up to 20 s to show at a load average of 15)."""

WIDE_THEN_NARROW = f"""
import time, pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.dags.declaration import Input
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage


def wide(spark):
    from pyspark.sql import functions as F

    def pause(part):
        time.sleep({WIDE_TASK_S})
        yield from part

    # Four tasks long enough that, one executor running them in turn, the others are asked for and register.
    ids = spark.sparkContext.range(0, 4000, numSlices=4).map(lambda i: (i,)).mapPartitions(pause)
    return spark.createDataFrame(ids, "id long").groupBy((F.col("id") % 4).alias("k")).agg(F.count("*").alias("n"))


def narrow(spark, counts):
    rows = [tuple(r) for r in counts.collect()]  # a job on all four executors: four scan tasks and a shuffle

    def slow(part):
        time.sleep({SLOW_TASK_S})
        yield from part

    # One task from here on: three executors have nothing to run, only the finished job's shuffle data.
    return spark.createDataFrame(spark.sparkContext.parallelize(rows, 1).mapPartitions(slow), "k long, n long")


with DAG("wide_then_narrow", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    counts = Stage(task_id="wide", python_callable=wide, parallelism=4)
    Stage(task_id="narrow", python_callable=narrow, inputs={{"counts": Input(counts, mode="pipelined")}}, parallelism=1)
"""


def executor_events(folder: Path) -> tuple[dict[str, Any], dict[str, float], dict[str, tuple[float, str]]]:
    """(application start/end, executor id -> added, executor id -> (removed, reason)) from the event log."""
    (log,) = [p for p in folder.iterdir() if not p.name.endswith(".inprogress")]
    app: dict[str, Any] = {}
    added: dict[str, float] = {}
    removed: dict[str, tuple[float, str]] = {}
    for line in log.read_text().splitlines():
        event = json.loads(line)
        kind = event.get("Event")
        if kind == "SparkListenerApplicationStart":
            app["start"] = event["Timestamp"] / 1000
        elif kind == "SparkListenerApplicationEnd":
            app["end"] = event["Timestamp"] / 1000
        elif kind == "SparkListenerJobStart":
            app.setdefault("first_job", event["Submission Time"] / 1000)
        elif kind == "SparkListenerJobEnd":
            app["last_job_end"] = event["Completion Time"] / 1000
        elif kind == "SparkListenerExecutorAdded":
            added[event["Executor ID"]] = event["Timestamp"] / 1000
        elif kind == "SparkListenerExecutorRemoved":
            removed[event["Executor ID"]] = (event["Timestamp"] / 1000, str(event.get("Removed Reason", "")))
    return app, added, removed


def test_a_region_gives_back_the_executors_its_narrow_stage_leaves_idle_and_answers_right(
    standalone_cluster: StandaloneCluster,
    airflow_db: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    events = tmp_path / "events"
    events.mkdir()
    connection = {
        "conn_type": "finegrained_spark",
        "host": standalone_cluster.master_url,
        "extra": {
            "master_webui_url": standalone_cluster.webui_url,
            "total_cores": 4,
            "total_memory": "8g",
            "executor_cores": 1,
            "executor_memory": "1g",
            "driver_memory": "1g",
            "capacity_poll_interval": 1,
            "spark_conf": {
                "spark.pyspark.python": sys.executable,
                "spark.eventLog.enabled": "true",
                "spark.eventLog.dir": events.as_uri(),
                "spark.eventLog.compress": "false",
                "spark.eventLog.rolling.enabled": "false",
                "spark.dynamicAllocation.shuffleTracking.timeout": f"{IDLE_S}s",
                "spark.dynamicAllocation.executorIdleTimeout": f"{IDLE_S}s",
            },
        },
    }
    monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", json.dumps(connection))
    dag = load_dag(write_dag_file("wide_then_narrow.py", textwrap.dedent(WIDE_THEN_NARROW)), "wide_then_narrow")
    run = dag.test()
    assert run.state == "success", {ti.task_id: ti.state for ti in run.get_task_instances()}

    # The answer: 4000 ids in four groups of 1000, through the released executors' shuffle.
    results = stage_results("wide_then_narrow", run.run_id)[1]
    table = pq.read_table(results["narrow"]["output"]["path"])
    assert sorted(zip(table.column("k").to_pylist(), table.column("n").to_pylist(), strict=True)) == [
        (k, 1000) for k in range(4)
    ]

    # One application for the region, planned on four executors...
    trace = results["narrow"]["trace"]
    assert results["wide"]["trace"]["application_id"] == trace["application_id"]
    assert trace["executors"] == 4
    assert lifecycle_text(trace["spark_conf"]) == (
        f"1 at the start, up to 4 from the first job, released when idle {IDLE_S} s"
    )
    app, added, removed = executor_events(events)
    # One held while the driver started (asked for with the application, so its start overlaps the
    # driver's); the others were asked for once the first job's tasks waited (1 s of backlog, then doubling).
    assert len([at for at in added.values() if at <= app["first_job"]]) <= 1, (app, added)
    assert len(added) >= 2, (app, added, removed)
    # ... and while the narrow stage's one task ran, every executor but the one running it went back to the
    # cluster, killed by the driver's dynamic allocation (not lost).
    alive_at_end = [e for e, at in added.items() if at < app["last_job_end"] and e not in removed]
    assert len(alive_at_end) == 1, (app, added, removed)
    last_wave = [e for e, (at, _) in removed.items() if at > app["first_job"]]
    # The executor asked for with the application may go idle before the first job on a busy machine (a driver
    # setup longer than the idle timeout, docs/cluster.md); none other goes before it.
    early = [e for e, (at, _) in removed.items() if at <= app["first_job"]]
    assert len(early) <= 1, (app, added, removed)
    assert len(last_wave) >= len(added) - 1 - len(early), (app, added, removed)
    assert all(reason == "Executor killed by driver." for _, reason in removed.values()), removed
    # Spark's own report of the narrow stage: one executor left when it ended.
    assert len(trace["spark_tasks"]["executors"]) == 1, trace["spark_tasks"]
    # The task log's trace says it too.
    assert f"released when idle {IDLE_S} s" in "".join(capfd.readouterr())

    # Reserved core-seconds against the same application with four fixed executors, counted (generously
    # to them) from the first executor's registration: a fixed application registers them at its start.
    reserved = sum((removed.get(e, (app["end"], ""))[0] - at) for e, at in added.items())
    fixed = 4 * (app["end"] - min(added.values()))
    released = sorted(round(removed[e][0] - app["first_job"], 1) for e in last_wave)
    print(
        f"first job {app['first_job'] - app['start']:.1f} s after the start; executors added "
        f"{[round(at - app['first_job'], 1) for at in sorted(added.values())]} s after it, "
        f"released {released} s after it; reserved {reserved:.0f} core-s vs {fixed:.0f} fixed "
        f"({fixed / reserved:.2f}x)"
    )
    assert reserved < fixed
