"""The setup/teardown pair in real Airflow: the pool outlives the task that started it; teardown stops it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from airflow_provider_finegrained.warm import check_health, status
from airflow_provider_finegrained.warm.auth import read_token
from airflow_provider_finegrained.warm.state import pool_processes
from tests.e2e.conftest import load_dag, write_dag_file

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.usefixtures("airflow_db")]

AIRFLOW = str(Path(sys.executable).parent / "airflow")
CONN_ID = "fg_warm_af"
CONN = {"conn_type": "finegrained_spark", "host": "local[1]", "extra": {"driver_memory": "1g"}}

DAG_FILE = """
import pendulum
from airflow.sdk import DAG, task

from airflow_provider_finegrained.operators.warm_pool import warm_pool_tasks
from airflow_provider_finegrained.warm import status

FOLDER = {folder!r}

with DAG("warm_pool_lifecycle", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    start, stop = warm_pool_tasks(finegrained_spark_conn_id={conn_id!r}, folder=FOLDER, idle_timeout=0)

    @task
    def failing_stage():
        info = status(FOLDER)
        assert info is not None and info["alive"], info
        raise RuntimeError("this stage fails; the teardown must still stop the pool")

    start >> failing_stage() >> stop
"""


@pytest.fixture(scope="module")
def dag_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    folder = str(tmp_path_factory.mktemp("warm-airflow") / "pool")
    path = write_dag_file("warm_pool_lifecycle.py", textwrap.dedent(DAG_FILE).format(folder=folder, conn_id=CONN_ID))
    previous = os.environ.get(f"AIRFLOW_CONN_{CONN_ID.upper()}")
    os.environ[f"AIRFLOW_CONN_{CONN_ID.upper()}"] = json.dumps(CONN)
    try:
        yield path, folder
    finally:
        from airflow_provider_finegrained.warm import stop

        stop(folder)
        if previous is None:
            del os.environ[f"AIRFLOW_CONN_{CONN_ID.upper()}"]


def tasks_test(task_id: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [AIRFLOW, "tasks", "test", "warm_pool_lifecycle", task_id],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=600,
        check=False,
    )


def test_pool_started_by_a_task_outlives_it_and_the_stop_task_stops_it(dag_file: tuple[Path, str]) -> None:
    _, folder = dag_file
    started = tasks_test("warm_pool_start")
    assert started.returncode == 0, (started.stdout + started.stderr)[-4000:]
    # The `airflow tasks test` process has exited; the pool it started still answers.
    info = status(folder)
    assert info is not None and info["alive"], info
    check_health(info["url"], token=read_token(folder))
    stopped = tasks_test("warm_pool_stop")
    assert stopped.returncode == 0, (stopped.stdout + stopped.stderr)[-4000:]
    assert status(folder) is None and pool_processes(folder) == []


def test_teardown_stops_the_pool_when_a_stage_fails(dag_file: tuple[Path, str]) -> None:
    path, folder = dag_file
    dag = load_dag(path, "warm_pool_lifecycle")
    assert dag.task_dict["warm_pool_start"].is_setup and dag.task_dict["warm_pool_stop"].is_teardown
    run = dag.test()
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == {"warm_pool_start": "success", "failing_stage": "failed", "warm_pool_stop": "success"}, states
    assert status(folder) is None and pool_processes(folder) == []
