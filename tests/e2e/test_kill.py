"""A stage task killed while its Spark application runs leaves no Spark process and no output."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import psutil
import pytest

from tests.e2e.conftest import start_task_test, write_dag_file

pytestmark = pytest.mark.slow

DAG = """
import time, pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

def sleeps(spark):
    spark.range(1).count()
    time.sleep(600)
    return spark.range(1)

with DAG("killed_stage", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    Stage(task_id="sleeps", python_callable=sleeps)
"""


def ours() -> list[str]:
    return [
        " ".join(p.info["cmdline"])[:200]
        for p in psutil.process_iter(["cmdline"])
        if "killed_stage" in " ".join(p.info["cmdline"] or [])
        and "airflow tasks test" not in " ".join(p.info["cmdline"])
    ]


def test_sigterm_to_the_task_stops_the_application(airflow_db: None, tmp_path: Path) -> None:
    write_dag_file("killed_stage.py", DAG)
    log = tmp_path / "task.log"
    task = start_task_test("killed_stage", "sleeps", log)
    try:
        deadline = time.monotonic() + 240
        while "Spark application id" not in log.read_text():
            assert task.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the Spark application never started"
            time.sleep(1)
        assert ours(), "the Spark application's processes should be running now"
        task.send_signal(signal.SIGTERM)
        task.wait(timeout=120)
    finally:
        if task.poll() is None:
            task.kill()
    text = log.read_text()
    assert "Task killed: stopping the Spark application and every process it started" in text
    assert ours() == []
    storage = Path(os.environ["AIRFLOW_HOME"]) / "finegrained" / "storage" / "killed_stage"
    assert not list(storage.glob("*/sleeps/try=*")), "a killed try must publish nothing"
