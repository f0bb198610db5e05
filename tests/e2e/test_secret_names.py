"""Issue #34's trial end to end: secrets named as Airflow names them (``spark.executorEnv.API_KEY``, ``passwd``,
``private_key``) on the connection's ``spark_conf`` reach Spark, and nothing else: not the trace XCom nor
``report --json``, not the files on the storage root, not any process's command line while the region
runs, not the task's output, not Spark's event log (which, like its UI, redacts with the provider's rule)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_finegrained.cli.main import main
from airflow_provider_finegrained.contract import TRACE_KEY
from airflow_provider_finegrained.secrets import REDACTED, REDACTION_REGEX_CONF
from tests.e2e.conftest import load_dag, run_xcoms, write_dag_file

pytestmark = [pytest.mark.slow, pytest.mark.security]

SECRETS = {
    "spark.executorEnv.API_KEY": "APIKEY-555qrs",
    "spark.executorEnv.DB_PASSWD": "passwd-777xyz",
    "spark.hadoop.my.private_key": "pk-999abc",
}
CONN_ID = "fg_secret_names"

DAG = """
import hashlib
import os

import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

# Digests only: the callable is pickled with what it refers to, into the region's folder on the storage root.
DIGESTS = {digests!r}


def numbers(spark):
    conf = spark.sparkContext.getConf()
    values = [conf.get(key) or "" for key in DIGESTS]
    if [hashlib.sha256(v.encode()).hexdigest() for v in values] != list(DIGESTS.values()):
        raise RuntimeError("the secret settings did not reach Spark")
    # While the region's application runs (its JVM, this driver, its workers): no command line shows a secret.
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{{pid}}/cmdline", "rb") as f:
                line = f.read().decode(errors="replace")
        except OSError:
            continue
        if any(value in line for value in values):
            raise RuntimeError(f"a secret is on the command line of process {{pid}}")
    return spark.range(10)


with DAG("secret_names", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    Stage(task_id="numbers", python_callable=numbers, finegrained_spark_conn_id={conn_id!r})
"""


def _environment_update(events: Path) -> dict[str, Any]:
    for path in events.rglob("*"):
        if path.is_file():
            for line in path.read_text(errors="replace").splitlines():
                event = json.loads(line)
                if event.get("Event") == "SparkListenerEnvironmentUpdate":
                    return dict(event)
    raise AssertionError(f"no environment update in the event log under {events}")


def test_airflow_named_secrets_reach_spark_and_nothing_else(
    airflow_db: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    root, events = tmp_path / "root", tmp_path / "events"
    events.mkdir()
    spark_conf = {
        **SECRETS,
        # The event log holds what Spark's UI shows (its environment page), redacted the same way.
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": events.as_uri(),
        "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false",
    }
    conn = {
        "conn_type": "finegrained_spark",
        "host": "local[1]",
        "extra": {"storage_root": str(root), "warm_pool": "off", "spark_conf": spark_conf},
    }
    monkeypatch.setenv(f"AIRFLOW_CONN_{CONN_ID.upper()}", json.dumps(conn))
    digests = {key: hashlib.sha256(value.encode()).hexdigest() for key, value in SECRETS.items()}
    path = write_dag_file("secret_names.py", DAG.format(digests=digests, conn_id=CONN_ID))
    run = load_dag(path, "secret_names").test()
    assert run.state == "success", [(ti.task_id, ti.state) for ti in run.get_task_instances()]
    task_output = "".join(capfd.readouterr())

    # The trace XCom records the settings, the secrets masked.
    trace = run_xcoms("secret_names", run.run_id, TRACE_KEY)["numbers"]
    assert {key: trace["spark_conf"][key] for key in SECRETS} == dict.fromkeys(SECRETS, REDACTED)
    assert trace["spark_conf"][REDACTION_REGEX_CONF]
    # `finegrained report --json`
    assert main(["report", "secret_names", "--run-id", run.run_id, "--json"]) == 0
    report = capfd.readouterr().out
    assert '"spark.executorEnv.API_KEY": "***"' in report
    # The storage root: the region's job, statuses and trace-*.json, the outputs, the history.
    files = [p for p in root.rglob("*") if p.is_file()]
    assert any(p.name.startswith("trace-") for p in files), sorted(str(p) for p in files)
    # Spark's event log: its environment, as the UI shows it.
    environment = _environment_update(events)
    properties = dict(environment["Spark Properties"])
    assert all("redacted" in properties[key] for key in SECRETS), {k: properties.get(k) for k in SECRETS}

    for value in SECRETS.values():
        assert value not in json.dumps(trace) and value not in report
        assert value not in task_output
        for file in files:
            assert value.encode() not in file.read_bytes(), file
        assert value not in json.dumps(environment)
