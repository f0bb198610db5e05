"""A dead standalone master: the task's error names the stage (not only the region) and says that the web UI
URL it asked, ``http://host:8080``, was derived (port 8080 assumed) when ``master_webui_url`` is not set.
No JVM: the capacity read fails before anything is submitted."""

from __future__ import annotations

import json
import socket
import textwrap
from pathlib import Path

import pytest

from airflow_provider_finegrained.launchers.standalone.capacity import webui_text
from airflow_provider_finegrained.settings import ConnectionSettings
from tests.e2e.conftest import load_dag, write_dag_file


def settings(master: str, **extra: object) -> ConnectionSettings:
    return ConnectionSettings.from_connection_fields(
        master, {"total_cores": 2, **extra}, airflow_home=str(Path("/nonexistent"))
    )


def test_the_web_ui_text_says_when_port_8080_was_assumed() -> None:
    assert webui_text(settings("spark://m1:7077")) == (
        "the master's web UI at http://m1:8080 (port 8080 assumed: set master_webui_url)"
    )
    assert webui_text(settings("spark://m1:7077,m2:7077")) == (
        "the masters' web UIs at http://m1:8080, http://m2:8080 (port 8080 assumed: set master_webui_url)"
    )
    assert webui_text(settings("spark://m1:7077", master_webui_url="http://ui:9090")) == (
        "the master's web UI at http://ui:9090"
    )
    shown = webui_text(settings("spark://m1:7077", master_webui_url="http://admin:s3cret@ui:9090"))
    assert "s3cret" not in shown and "ui:9090" in shown


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


DAG = """
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage


def numbers(spark):
    return spark.range(100)


with DAG("{dag_id}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    Stage(task_id="numbers", python_callable=numbers)
"""


@pytest.mark.slow  # a dag.test() that retries its capacity read
@pytest.mark.security
@pytest.mark.skipif(listening(8080), reason="something listens on 127.0.0.1:8080: the derived URL would answer")
def test_a_dead_master_fails_naming_the_stage_and_the_assumed_web_ui_port(
    airflow_db: None, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    master = f"spark://127.0.0.1:{free_port()}"
    conn = {"conn_type": "finegrained_spark", "host": master, "extra": {"total_cores": 2, "executor_cores": 1}}
    monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", json.dumps(conn))
    dag_id = "dead_master_wording"
    dag = load_dag(write_dag_file(f"{dag_id}.py", textwrap.dedent(DAG.format(dag_id=dag_id))), dag_id)
    run = dag.test()
    assert run.state == "failed"
    text = "".join(capfd.readouterr())
    expected = (
        f"stage 'numbers' (region region-1): cannot read the free capacity of {master} from the master's web UI "
        "at http://127.0.0.1:8080 (port 8080 assumed: set master_webui_url): no standalone master answered"
    )
    assert expected in " ".join(text.split()), text[-4000:]
    assert "Submitting region" not in text
