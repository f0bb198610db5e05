"""Connections made with the real `airflow connections add` CLI, read back by the hook; masking in a task run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_finegrained.settings import settable_fields, setting_of

# Each Airflow CLI call starts a Python with Airflow (5-10 s): run apart from the unit tests with -m slow.
pytestmark = [pytest.mark.slow, pytest.mark.airflow]

AIRFLOW = str(Path(sys.executable).parent / "airflow")
GiB = 2**30


def airflow(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [AIRFLOW, *args], capture_output=True, text=True, env={**os.environ, **(env or {})}, timeout=300, check=False
    )
    assert done.returncode == 0, f"airflow {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}"
    return done


# The metadata database the CLI stores connections in: the session's (tests/conftest.py `airflow_db`), migrated
# once for the whole run instead of a second `airflow db migrate` here.


CONNECTIONS: dict[str, list[str]] = {
    # Integers, booleans and nested JSON as a user types them; the CLI stores the extra as it likes.
    "fg_cli_json": [
        "--conn-json",
        json.dumps(
            {
                "conn_type": "finegrained_spark",
                "host": "spark://127.0.0.1:7077",
                "password": "cli-shared-secret-1",
                "extra": {
                    "total_cores": 6,
                    "executor_cores": "3",
                    "executor_memory": "3g",
                    "max_parallelism": 48,
                    "adaptive_query_execution": False,
                    "storage_root": "s3://lake/fg",
                    "spark_conf": {"spark.eventLog.enabled": True, "spark.hadoop.fs.example.signing.key": "cli-sig-2"},
                },
            }
        ),
    ],
    "fg_cli_flags": [
        "--conn-type", "finegrained_spark",
        "--conn-host", "local[2]",
        "--conn-extra", json.dumps({"max_parallelism": "16", "driver_memory": "1g", "normalize": "power_of_two"}),
    ],
    "fg_cli_typo": [
        "--conn-json",
        json.dumps({"conn_type": "finegrained_spark", "host": "local[1]", "extra": {"max_paralelism": 8}}),
    ],
}  # fmt: skip

# Runs in a fresh process, as an Airflow component would: it reads the airflow.cfg (and Fernet key) that
# the CLI wrote; this test process loaded its configuration before that file existed.
READER = """
import json, sys
from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook
out = {}
for conn_id in sys.argv[1:]:
    try:
        out[conn_id] = FineGrainedSparkHook(conn_id).get_settings().redacted()
    except Exception as exc:
        out[conn_id] = {"error": f"{type(exc).__name__}: {exc}"}
print("RESULT " + json.dumps(out))
"""


@pytest.fixture(scope="module")
def read_back(airflow_db: None) -> dict[str, dict[str, Any]]:
    """Each connection added with `airflow connections add`, read back by the hook in a server process."""
    for conn_id, args in CONNECTIONS.items():
        airflow("connections", "add", conn_id, *args)
    done = subprocess.run(
        [sys.executable, "-c", READER, *CONNECTIONS, "fg_cli_missing"],
        capture_output=True,
        text=True,
        # Outside a task the Task SDK reads connections from env vars only; the server context adds the database.
        env={**os.environ, "_AIRFLOW_PROCESS_CONTEXT": "server"},
        timeout=300,
        check=True,
    )
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    result: dict[str, dict[str, Any]] = json.loads(line[len("RESULT ") :])
    assert "cli-shared-secret-1" not in done.stdout + done.stderr
    assert "cli-sig-2" not in done.stdout + done.stderr
    return result


def test_conn_json_connection_is_coerced(read_back: dict[str, dict[str, Any]]) -> None:
    settings = read_back["fg_cli_json"]
    assert (settings["master"], settings["total_cores"], settings["executor_cores"]) == ("spark://127.0.0.1:7077", 6, 3)
    assert (settings["executor_memory"], settings["total_memory"]) == (3 * GiB, 2 * (3 * GiB + 384 * 2**20))
    assert (settings["max_parallelism"], settings["adaptive_query_execution"]) == (48, False)
    assert settings["storage_root"] == "s3://lake/fg"
    assert settings["spark_conf"] == {
        "spark.authenticate": "true",  # from the password field
        "spark.authenticate.secret": "***",
        "spark.eventLog.enabled": "true",
        "spark.hadoop.fs.example.signing.key": "***",
    }


def test_flag_form_connection_is_coerced(read_back: dict[str, dict[str, Any]]) -> None:
    # Until the provider info lists the connection type, this CLI form stores conn_type "generic".
    settings = read_back["fg_cli_flags"]
    assert (settings["master"], settings["total_cores"], settings["total_memory"]) == ("local[2]", 2, GiB)
    assert (settings["max_parallelism"], settings["normalize"]) == (16, "power_of_two")


def test_cli_connection_with_a_typo_is_refused_by_name(read_back: dict[str, dict[str, Any]]) -> None:
    assert read_back["fg_cli_typo"]["error"].startswith(
        "ConnectionSettingsError: connection 'fg_cli_typo': max_paralelism: unknown connection extra "
        "(did you mean 'max_parallelism'?)"
    )


def test_missing_connection_in_a_server_process(read_back: dict[str, dict[str, Any]]) -> None:
    assert (
        "'fg_cli_missing' is not defined; create it with `airflow connections add fg_cli_missing"
        in (read_back["fg_cli_missing"]["error"])
    )


DAG_FILE = """
import pendulum
from airflow.sdk import dag, task


@dag(schedule=None, start_date=pendulum.datetime(2026, 1, 1), catchup=False)
def fg_mask_probe():
    @task
    def read_settings() -> dict:
        from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook

        settings = FineGrainedSparkHook("fg_task").get_settings()
        print("careless print:", settings.spark_conf["spark.hadoop.fs.example.signing.key"])
        return settings.redacted()

    read_settings()


fg_mask_probe()
"""


@pytest.mark.usefixtures("airflow_db")
@pytest.mark.security
def test_task_output_masks_a_spark_conf_secret(tmp_path: Path) -> None:
    # `airflow tasks test` runs the task with Airflow's masker on its output; the secret's key ends in
    # ".key", which Airflow's own sensitive-name list does not cover: only the hook's registration masks it.
    secret = "task-signing-key-77"
    (tmp_path / "fg_mask_probe.py").write_text(DAG_FILE)
    conn = {
        "conn_type": "finegrained_spark",
        "host": "local[1]",
        "extra": {"spark_conf": {"spark.hadoop.fs.example.signing.key": secret}},
    }
    done = airflow(
        "tasks", "test", "fg_mask_probe", "read_settings",
        env={"AIRFLOW__CORE__DAGS_FOLDER": str(tmp_path), "AIRFLOW_CONN_FG_TASK": json.dumps(conn)},
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert "careless print: ***" in output
    assert "'spark.hadoop.fs.example.signing.key': '***'" in output  # the hook's own log line
    assert secret not in output


# Runs the Airflow CLI with connection_types() and config_section() in the provider info, as the lead
# wires them, so Airflow's own provider manager, CLI and UI API are checked against these entries now.
WIRED = """
import sys
import airflow_provider_finegrained.get_provider_info as info
from airflow_provider_finegrained.settings.form import config_section, connection_types

original = info.get_provider_info
info.get_provider_info = lambda: {**original(), "connection-types": connection_types(), "config": config_section()}
if sys.argv[1] == "hook-meta":
    import json
    from airflow.api_fastapi.core_api.services.ui.connections import HookMetaService

    meta = next(m for m in HookMetaService.hook_meta_data() if m.connection_type == "finegrained_spark")
    print("RESULT " + json.dumps(meta.model_dump(), default=str))
else:
    from airflow.__main__ import main

    sys.exit(main())
"""


def wired(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, "-c", WIRED, *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"{args} failed:\n{done.stdout}\n{done.stderr}"
    return done


@pytest.mark.usefixtures("airflow_db")
def test_wired_connection_type_is_kept_and_tested_by_the_cli() -> None:
    wired("connections", "add", "fg_cli_wired", "--conn-type", "finegrained_spark", "--conn-host", "local[1]")
    got = wired("connections", "get", "fg_cli_wired", "-o", "json")
    assert json.loads(got.stdout[got.stdout.index("[") :])[0]["conn_type"] == "finegrained_spark"
    done = wired("connections", "test", "fg_cli_wired", env={"AIRFLOW__CORE__TEST_CONNECTION": "Enabled"})
    assert "Connection success!" in done.stdout


def test_wired_form_as_the_ui_api_serves_it() -> None:
    done = wired("hook-meta")
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))
    meta = json.loads(line[len("RESULT ") :])
    assert meta["hook_name"] == "Fine-grained Spark"
    host, port = meta["standard_fields"]["host"], meta["standard_fields"]["port"]
    assert (host["title"], host["placeholder"], port["hidden"]) == (
        "Spark master URL",
        "local[*] or spark://127.0.0.1:7077",
        True,
    )
    assert meta["extra_fields"]["max_parallelism"]["schema"] == {
        "type": ["integer", "null"],
        "minimum": 1,
        "title": "Maximum parallelism",
    }
    assert meta["extra_fields"]["max_parallelism"]["value"] is None  # unset: [finegrained] still applies
    # Every declared setting but the master URL (the host field) reaches the form, none dropped or added.
    declared = {name for name in settable_fields() if not setting_of(name).host_field}
    assert set(meta["extra_fields"]) == declared
    assert "master" not in meta["extra_fields"]
    assert meta["extra_fields"]["total_gpus"]["schema"]["title"] == "Total GPUs"
    assert meta["extra_fields"]["gpu_discovery_script"]["schema"]["title"] == "GPU discovery script"
    assert meta["extra_fields"]["python_env"]["schema"]["title"] == "Python environment"
    assert meta["extra_fields"]["hadoop_conf_dir"]["schema"]["title"] == "Hadoop configuration folder"
    assert meta["extra_fields"]["executors_from"]["schema"]["title"] == "Executors from"
    assert meta["extra_fields"]["admission"]["schema"]["title"] == "Admission"
    assert meta["extra_fields"]["history_min_runs"]["schema"]["title"] == "History runs needed"
    assert meta["extra_fields"]["storage_conn_id"]["schema"]["title"] == "Storage connection id"
