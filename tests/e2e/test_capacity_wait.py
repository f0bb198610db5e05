"""Declarative resources end to end on local Spark: a region that does not fit waits on a trigger.

The local machine's capacity is taken by another holder's reservation in the ledger (as a parallel
branch's region would hold it); the stage's task defers, holding no worker slot, and either runs
once the holder lets go or fails at the deadline saying what it asked and what was free.
"""

from __future__ import annotations

import socket
import subprocess
import textwrap
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_finegrained.capacity import Reservation, ReservationLedger
from airflow_provider_finegrained.cli.report import stage_results
from airflow_provider_finegrained.execution.capacity_gate import capacity_source
from airflow_provider_finegrained.hooks import FineGrainedSparkHook
from tests.e2e.conftest import load_dag, write_dag_file

pytestmark = pytest.mark.slow

DAG_TEXT = """
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage


def numbers(spark):
    return spark.range(0, 100).withColumnRenamed("id", "n")


with DAG("{dag_id}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    Stage(task_id="numbers", python_callable=numbers)
"""


@pytest.fixture
def occupier(airflow_db: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[ReservationLedger]:
    """Every core of the embedded default reserved by a live process that is not this test."""
    monkeypatch.setenv("AIRFLOW__FINEGRAINED__CAPACITY_POLL_INTERVAL", "0.5")
    settings = FineGrainedSparkHook().get_settings()
    folder = capacity_source(settings).ledger_folder
    assert folder is not None
    ledger = ReservationLedger(folder)
    holder = subprocess.Popen(["sleep", "600"])
    with ledger.locked() as view:
        view.add(
            Reservation(
                key="other-dag/run/region-1/try=1",
                app_name="other-dag.region-1",
                executors=1,
                executor_cores=settings.total_cores,
                executor_memory=1,
                host=socket.gethostname(),
                pid=holder.pid,
                created_at=time.time(),
            )
        )
    try:
        yield ledger
    finally:
        ledger.release("other-dag/run/region-1/try=1")
        holder.kill()
        holder.wait()


def run(dag_id: str) -> tuple[str, dict[str, str], str]:
    path = write_dag_file(f"{dag_id}.py", textwrap.dedent(DAG_TEXT.format(dag_id=dag_id)))
    dag_run = load_dag(Path(path), dag_id).test()
    return dag_run.run_id, {ti.task_id: ti.state for ti in dag_run.get_task_instances()}, dag_run.state


def test_a_region_waits_until_capacity_frees_then_runs(
    occupier: ReservationLedger, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__FINEGRAINED__CAPACITY_WAIT_TIMEOUT", "600")
    deferred = threading.Event()
    stop = threading.Event()

    def release_once_deferred() -> None:
        # The other holder lets go only after the stage has deferred, plus a few seconds of waiting.
        while not stop.is_set():
            if _deferred_for_capacity("waits_for_capacity"):
                deferred.set()
                time.sleep(3)
                occupier.release("other-dag/run/region-1/try=1")
                return
            time.sleep(0.2)

    _deferred_for_capacity("waits_for_capacity")  # import Airflow's models here, not in two threads at once
    releaser = threading.Thread(target=release_once_deferred, daemon=True)
    releaser.start()
    try:
        run_id, states, _ = run("waits_for_capacity")
    finally:
        stop.set()
        releaser.join(timeout=10)
    assert deferred.is_set()
    assert states == {"numbers": "success"}
    trace = stage_results("waits_for_capacity", run_id)[1]["numbers"]["trace"]
    assert trace["capacity"]["outcome"] == "as_requested after waiting"
    assert trace["capacity"]["waited_s"] >= 3


def _deferred_for_capacity(dag_id: str) -> bool:
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session

    with create_session() as session:
        return (
            session.query(TaskInstance)
            .filter(TaskInstance.dag_id == dag_id, TaskInstance.next_method == "resume_after_capacity")
            .count()
            > 0
        )


def test_a_region_that_never_fits_fails_at_the_deadline_with_the_numbers(
    occupier: ReservationLedger, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("AIRFLOW__FINEGRAINED__CAPACITY_WAIT_TIMEOUT", "3")
    started = time.monotonic()
    _, states, state = run("capacity_deadline")
    assert (states, state) == ({"numbers": "failed"}, "failed")
    assert time.monotonic() - started < 120
    text = "".join(capfd.readouterr())
    assert "Deferring until capacity frees" in text
    assert "waited" in text and "for capacity, up to capacity_wait_timeout, and gave up" in text
    assert "not enough free resources: asked for 1 executor(s) of" in text
    assert "free: 0 core(s)" in text
