"""Every place a secret named by Airflow's rule could land, at unit level (no Spark started): the submit
command and its properties file, the warm pool's server command, Spark's own redaction and the pool UI's
address, the connection's log masking."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_finegrained.execution.region_job import application_conf
from airflow_provider_finegrained.planning import ClusterProfile, StageDemand, size_region
from airflow_provider_finegrained.secrets import REDACTED, REDACTION_REGEX_CONF, spark_redaction_regex
from airflow_provider_finegrained.settings import ConnectionSettings
from airflow_provider_finegrained.spark.submit import SubmitRequest, redacted_command, spark_submit_command
from airflow_provider_finegrained.warm import pool_shape
from airflow_provider_finegrained.warm.server import server_command, server_conf, server_env, server_secret_conf
from tests.decisions import sized_decision
from tests.security.test_secrets import AIRFLOW_NAMED_SECRETS

pytestmark = pytest.mark.security

GiB = 2**30
PUBLIC = {"spark.eventLog.enabled": "false", "spark.sql.session.timeZone": "UTC"}


@pytest.fixture
def fake_home(tmp_path: Path) -> str:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "spark-submit").write_text("#!/bin/sh\n")
    return str(tmp_path)


def _leaks(args: list[str]) -> list[str]:
    return [arg for arg in args if any(value in arg for value in AIRFLOW_NAMED_SECRETS.values())]


@pytest.mark.parametrize(
    "request_fields",
    [
        {"master": "local[2]"},
        {"master": "spark://127.0.0.1:7077", "deploy_mode": "client"},
        # PythonRunner under this interpreter: the standalone cluster-mode command is built apart
        {"master": "spark://127.0.0.1:7077", "deploy_mode": "cluster", "primary_jar": "/jars/tags.jar"},
    ],
)
def test_spark_submit_argv_holds_no_airflow_named_secret_its_properties_file_does(
    fake_home: str, request_fields: dict[str, Any]
) -> None:
    request = SubmitRequest(application="/apps/job.py", conf={**AIRFLOW_NAMED_SECRETS, **PUBLIC}, **request_fields)
    with spark_submit_command(request, spark_home=fake_home) as command:
        assert _leaks(command) == []
        assert not any(key in arg for arg in command for key in AIRFLOW_NAMED_SECRETS)
        assert "spark.sql.session.timeZone=UTC" in command
        text = Path(command[command.index("--properties-file") + 1]).read_text()
        for key, value in AIRFLOW_NAMED_SECRETS.items():
            assert f"{key}={value}\n" in text
        assert "timeZone" not in text  # only the secrets are in the file
        assert redacted_command(command) == command


def _local_settings(tmp_path: Path, spark_conf: dict[str, str]) -> ConnectionSettings:
    return ConnectionSettings.embedded_default(
        airflow_home=str(tmp_path), defaults={"total_cores": 1, "driver_memory": "1g", "spark_conf": spark_conf}
    )


def test_the_warm_servers_command_holds_no_airflow_named_secret(tmp_path: Path) -> None:
    settings = _local_settings(tmp_path, {**AIRFLOW_NAMED_SECRETS, **PUBLIC})
    command = server_command(settings, pool_shape(settings), 1, 2, "/f")
    assert _leaks(command) == [] and "spark.sql.session.timeZone=UTC" in command
    assert server_secret_conf(settings) == AIRFLOW_NAMED_SECRETS  # its properties file's
    # Spark's UI (its environment page), event log and logs redact with the provider's rule.
    assert f"{REDACTION_REGEX_CONF}={spark_redaction_regex()}" in command


def test_a_loopback_pools_ui_listens_on_loopback_only(tmp_path: Path) -> None:
    # Spark's UI binds to SPARK_LOCAL_IP, else 0.0.0.0; a caller's own address does not widen it.
    settings = _local_settings(tmp_path, {})
    assert server_env(settings, {"SPARK_LOCAL_IP": "0.0.0.0"})["SPARK_LOCAL_IP"] == "127.0.0.1"
    standalone = ConnectionSettings.from_connection_fields(
        "spark://127.0.0.1:7077", {"total_cores": 2, "storage_root": str(tmp_path)}, airflow_home=str(tmp_path)
    )
    assert server_env(standalone, {})["SPARK_LOCAL_IP"] == "127.0.0.1"


def test_spark_redacts_with_the_rule_in_every_application_the_provider_starts(tmp_path: Path) -> None:
    profile = ClusterProfile(total_cores=2, total_memory=4 * GiB, executor_cores=2, executor_memory=GiB, local=True)
    sizing = size_region([StageDemand("s", 2)], profile)
    settings = _local_settings(tmp_path, {**AIRFLOW_NAMED_SECRETS})
    regex = application_conf(sized_decision(sizing, settings), settings, {}, [])[REDACTION_REGEX_CONF]
    assert regex == spark_redaction_regex()
    assert server_conf(settings, pool_shape(settings), 1, 2, "/f")[REDACTION_REGEX_CONF] == regex
    for key in AIRFLOW_NAMED_SECRETS:
        assert re.search(regex, key), key  # what Spark's default, (?i)secret|password|token|access[.]?key, misses


def test_a_users_own_redaction_regex_wins(tmp_path: Path) -> None:
    profile = ClusterProfile(total_cores=2, total_memory=4 * GiB, executor_cores=2, executor_memory=GiB, local=True)
    sizing = size_region([StageDemand("s", 2)], profile)
    settings = _local_settings(tmp_path, {REDACTION_REGEX_CONF: "(?i)mine"})
    assert application_conf(sized_decision(sizing, settings), settings, {}, [])[REDACTION_REGEX_CONF] == "(?i)mine"
    assert server_conf(settings, pool_shape(settings), 1, 2, "/f")[REDACTION_REGEX_CONF] == "(?i)mine"


def test_the_connection_registers_airflow_named_secrets_with_the_masker_and_redacts_them(tmp_path: Path) -> None:
    settings = _local_settings(tmp_path, {**AIRFLOW_NAMED_SECRETS, **PUBLIC})
    assert set(settings.secret_values()) >= set(AIRFLOW_NAMED_SECRETS.values())
    shown = settings.redacted()
    assert shown["spark_conf"] == {**dict.fromkeys(AIRFLOW_NAMED_SECRETS, REDACTED), **PUBLIC}
    assert not any(value in repr(settings) for value in AIRFLOW_NAMED_SECRETS.values())
