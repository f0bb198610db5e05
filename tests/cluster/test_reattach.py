"""Regions that outlive their worker on purpose, on the real standalone cluster and real Airflow.

The leader's first try runs in a child process (``dag.test`` of a fixed run), which is SIGKILLed once the
region's driver runs on a worker: a worker that died. The scheduler would then mark the task
``up_for_retry``; the retry (the same run's task, try 2) runs in this process through the loop
``dag.test`` uses (``dag.test`` itself would delete the run, and the task state store with it). It finds
the application in the task state store and reattaches to it: no second driver, the output committed
once by the first try's application, and the downstream stage reads it. That downstream stage is
``deferrable``: its leader defers while its driver runs and the trigger runs inline, as in ``dag.test``.

Before this, the retry reset the region folder and submitted a second driver while the first one was
still writing (three drivers for the run's two regions; see docs/operators.md).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pendulum
import psutil
import pyarrow.parquet as pq
import pytest

from airflow_provider_finegrained.cli.report import stage_results
from airflow_provider_finegrained.spark.standalone import StandaloneCluster
from tests.cluster.test_pipeline_on_standalone import connection
from tests.conftest import REPO
from tests.e2e.conftest import load_dag, write_dag_file

pytestmark = pytest.mark.slow

DAG_ID = "reattach_on_cluster"
DAG_TEXT = f"""
import time, pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage


def slow(spark):
    df = spark.range(0, 1000, 1, 2).withColumnRenamed("id", "n")
    df.count()
    time.sleep(20)  # long enough for its task to be killed and retried while it runs
    return df


def squares(spark, rows):
    return rows.selectExpr("n", "n * n AS square")


with DAG("{DAG_ID}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
         default_args={{"retries": 1, "retry_delay": 0}}):
    first = Stage(task_id="slow", python_callable=slow, parallelism=2)
    Stage(task_id="squares", python_callable=squares, inputs={{"rows": first}}, parallelism=2, deferrable=True)
"""

FIRST_TRY = """
import sys
import pendulum
from pathlib import Path
from tests.e2e.conftest import load_dag

when = pendulum.parse(sys.argv[2])
load_dag(Path(sys.argv[1]), sys.argv[3]).test(logical_date=when, run_after=when)
"""


def driver_ids(cluster: StandaloneCluster) -> set[str]:
    status = cluster.status()
    return {d["id"] for d in [*status["activedrivers"], *status["completeddrivers"]]}


def first_try_dies_once_recorded(path: Path, when: Any, dag_id: str, log: Path, timeout_s: float = 300) -> None:
    """Try 1 of the run at ``when`` in a child process, SIGKILLed (with its whole session: a worker host that
    died) as soon as it has recorded its region's application for reattach."""
    with log.open("w") as out:
        first = subprocess.Popen(
            [sys.executable, "-c", FIRST_TRY, str(path), when.isoformat(), dag_id],
            cwd=REPO,
            env=os.environ.copy(),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + timeout_s
        while "recorded for reattach" not in log.read_text():
            assert first.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(0.5)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait(timeout=30)


def worker_lost(dag_id: str, task_id: str) -> int:
    """What the scheduler does to a task whose worker stopped heart-beating (retries left); its try number."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        ti = session.scalars(
            select(TaskInstance).where(TaskInstance.dag_id == dag_id, TaskInstance.task_id == task_id)
        ).one()
        assert ti.state == "running", ti.state
        ti.state = "up_for_retry"
        ti.end_date = pendulum.now("UTC")
        return int(ti.try_number)


def run_on(dag: Any, logical_date: Any) -> Any:
    """Run the DAG's existing run to its end as ``dag.test`` does (schedule, run in process, triggers inline)."""
    from airflow.models.dagrun import DagRun
    from airflow.sdk.definitions.dag import _run_task
    from airflow.serialization.serialized_objects import DagSerialization
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        query = select(DagRun).where(DagRun.dag_id == dag.dag_id, DagRun.logical_date == logical_date)
        run = session.scalars(query).one()
        run.dag = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag))
        deadline = time.monotonic() + 600
        while run.state == "running":
            assert time.monotonic() < deadline
            session.expire_all()
            schedulable, _ = run.update_state(session=session)
            for ti in schedulable:
                ti.try_number += 1
                ti.state = "scheduled"
            session.commit()
            for ti in [t for t in run.get_task_instances(session=session) if t.state == "scheduled"]:
                _run_task(ti=ti, task=dag.task_dict[ti.task_id], run_triggerer=True)
        return run


def test_a_retry_after_the_worker_died_reattaches_instead_of_submitting_again(
    standalone_cluster: StandaloneCluster,
    airflow_db: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = standalone_cluster
    root = tmp_path / "root"
    monkeypatch.setenv(
        "AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", connection(cluster, deploy_mode="cluster", storage_root=str(root))
    )
    path = write_dag_file(f"{DAG_ID}.py", textwrap.dedent(DAG_TEXT))
    when = pendulum.now("UTC").replace(microsecond=0)
    before = driver_ids(cluster)

    # -- try 1, in a worker that dies once the region's driver runs on the cluster
    first_try_dies_once_recorded(path, when, DAG_ID, tmp_path / "first-try.log")
    (submitted,) = driver_ids(cluster) - before
    assert [d["state"] for d in cluster.status()["activedrivers"] if d["id"] == submitted] in (
        ["SUBMITTED"],
        ["RUNNING"],
    )
    assert worker_lost(DAG_ID, "slow") == 1
    capfd.readouterr()

    # -- try 2, of the same run
    run = run_on(load_dag(path, DAG_ID), when)
    # Where Airflow's log lines land (the terminal or logging's capture) depends on what configured logging
    # earlier in the same pytest process: look in both.
    streams = ["".join(capfd.readouterr()), caplog.text]
    text = "\n".join(streams)
    assert run.state == "success", text[-5000:]
    tries = {ti.task_id: ti.try_number for ti in run.get_task_instances()}
    assert tries["slow"] == 2

    # Exactly one application per region: the first try's driver for `slow`, one for `squares`.
    new = driver_ids(cluster) - before
    assert submitted in new and len(new) == 2, new
    completed = {d["id"]: d["state"] for d in cluster.status()["completeddrivers"]}
    assert {completed[d] for d in new} == {"FINISHED"}
    assert f"reattached to {submitted} submitted by try 1" in text
    # Only `squares`' region was submitted by this process (a line may reach both streams: count per stream).
    assert max(stream.count("Submitting region") for stream in streams) == 1

    results = stage_results(DAG_ID, run.run_id)[1]
    slow, squares = results["slow"], results["squares"]
    assert slow["trace"]["execution"]["reason"] == f"reattached to {submitted} submitted by try 1"
    assert slow["trace"]["application_id"].startswith("app-")
    # Committed once, by try 1's application, in its try's folder; the downstream stage read exactly it.
    assert "/try=1" in slow["output"]["path"] and slow["output"]["rows"] == 1000
    assert sorted(pq.read_table(slow["output"]["data_path"]).column("n").to_pylist()) == list(range(1000))
    table = pq.read_table(squares["output"]["data_path"])
    assert sorted(zip(table.column("n").to_pylist(), table.column("square").to_pylist(), strict=True)) == [
        (n, n * n) for n in range(1000)
    ]
    # `squares` deferred while its driver ran, and came back through the trigger.
    assert "the task defers while it runs" in text and "[DAG TEST] running trigger in line" in text
    assert squares["trace"]["execution"]["mode"] == "cold"
    # The first try's spark-submit (which only followed the driver) ended with it.
    leftovers = [p for p in psutil.process_iter(["cmdline"]) if DAG_ID in " ".join(p.info["cmdline"] or [])]
    deadline = time.monotonic() + 60
    while [p for p in leftovers if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]:
        assert time.monotonic() < deadline, leftovers
        time.sleep(1)
