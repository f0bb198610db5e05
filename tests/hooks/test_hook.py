"""FineGrainedSparkHook against real Airflow: AIRFLOW_CONN_* connections, [finegrained] config, the masker."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk._shared.secrets_masker import SecretsMasker, _secrets_masker
from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_provider_finegrained.hooks import FineGrainedSparkHook as LazyHook
from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook, read_config_defaults
from airflow_provider_finegrained.hooks.java_check import check_java_directly
from airflow_provider_finegrained.settings import ConnectionSettingsError
from airflow_provider_finegrained.settings.cluster import available_cpus

GiB = 2**30
MiB = 2**20


def hook_log(capfd: pytest.CaptureFixture[str]) -> str:
    """What the hook logged: its logger is the Task SDK's structlog logger, which writes to the console."""
    out, err = capfd.readouterr()
    return out + err


def set_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, **conn: Any) -> None:
    conn.setdefault("conn_type", "finegrained_spark")
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))


@pytest.fixture(autouse=True)
def _no_finegrained_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("AIRFLOW__FINEGRAINED__") or name == "AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT":
            monkeypatch.delenv(name)


def test_hook_identity() -> None:
    assert LazyHook is FineGrainedSparkHook
    assert FineGrainedSparkHook.conn_name_attr == "finegrained_spark_conn_id"
    assert FineGrainedSparkHook.default_conn_name == "finegrained_spark_default"
    assert FineGrainedSparkHook.conn_type == "finegrained_spark"
    assert FineGrainedSparkHook.hook_name == "Fine-grained Spark"
    assert FineGrainedSparkHook().finegrained_spark_conn_id == "finegrained_spark_default"


def test_json_env_connection_is_coerced(monkeypatch: pytest.MonkeyPatch) -> None:
    # Strings everywhere, as `airflow connections add` stores them.
    extra = {
        "storage_root": "s3://lake/finegrained",
        "total_cores": "8",
        "total_memory": "24g",
        "executor_cores": "4",
        "executor_memory": "6g",
        "max_parallelism": "64",
        "adaptive_query_execution": "false",
        "spark_conf": json.dumps({"spark.eventLog.enabled": True}),
    }
    set_connection(monkeypatch, "fg_standalone", host="spark://10.0.0.5:7077", extra=extra)
    settings = FineGrainedSparkHook("fg_standalone").get_settings()
    assert settings.master == "spark://10.0.0.5:7077" and settings.master_kind == "standalone"
    assert (settings.total_cores, settings.total_memory) == (8, 24 * GiB)
    assert (settings.executor_cores, settings.executor_memory) == (4, 6 * GiB)
    assert (settings.max_parallelism, settings.adaptive_query_execution) == (64, False)
    assert dict(settings.spark_conf) == {"spark.eventLog.enabled": "true"}
    assert settings.storage_root == "s3://lake/finegrained"


def test_uri_env_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_FG_URI", "finegrained-spark://?master=local%5B2%5D&max_parallelism=16")
    settings = FineGrainedSparkHook("fg_uri").get_settings()
    assert (settings.master, settings.total_cores, settings.max_parallelism) == ("local[2]", 2, 16)


def test_settings_are_read_once_per_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(monkeypatch, "fg_cached", host="local[2]")
    hook = FineGrainedSparkHook("fg_cached")
    first = hook.get_settings()
    set_connection(monkeypatch, "fg_cached", host="local[1]")
    assert hook.get_settings() is first
    assert hook.get_conn() is first
    assert FineGrainedSparkHook("fg_cached").get_settings().master == "local[1]"


def test_missing_default_connection_means_the_embedded_default(capfd: pytest.CaptureFixture[str]) -> None:
    hook = FineGrainedSparkHook()
    settings = hook.get_settings()
    assert hook.used_embedded_default
    assert settings.master == f"local[{available_cpus()}]" and settings.is_local
    assert settings.storage_root == os.path.join(os.environ["AIRFLOW_HOME"], "finegrained", "storage")
    assert "'finegrained_spark_default' is not defined: using the embedded default" in hook_log(capfd)


def test_embedded_default_takes_the_finegrained_config_section(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__FINEGRAINED__MASTER", "local[1]")
    monkeypatch.setenv("AIRFLOW__FINEGRAINED__MAX_PARALLELISM", "16")
    monkeypatch.setenv("AIRFLOW__FINEGRAINED__DRIVER_MEMORY", "1g")
    monkeypatch.delenv("AIRFLOW__FINEGRAINED__WARM_POOL", raising=False)  # tests/conftest.py sets it
    assert read_config_defaults() == {"master": "local[1]", "max_parallelism": "16", "driver_memory": "1g"}
    settings = FineGrainedSparkHook().get_settings()
    assert (settings.master, settings.max_parallelism, settings.total_memory) == ("local[1]", 16, GiB)


def test_an_unreadable_config_option_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    # What a failing AIRFLOW__FINEGRAINED__*_CMD or secrets-backend lookup does inside conf.get.
    from airflow.sdk import conf

    def broken_get(section: str, key: str, **kwargs: Any) -> Any:
        if key == "spark_conf":
            raise RuntimeError("command failed")
        return original(section, key, **kwargs)

    original = conf.get
    monkeypatch.setattr(conf, "get", broken_get)
    with pytest.raises(ConnectionSettingsError, match=r"\[finegrained\] spark_conf: cannot be read \(command failed\)"):
        FineGrainedSparkHook().get_settings()


def test_config_section_applies_under_a_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW__FINEGRAINED__MAX_PARALLELISM", "16")
    monkeypatch.setenv("AIRFLOW__FINEGRAINED__MIN_PARALLELISM", "2")
    set_connection(monkeypatch, "fg_over", host="local[2]", extra={"max_parallelism": "32"})
    settings = FineGrainedSparkHook("fg_over").get_settings()
    assert (settings.min_parallelism, settings.max_parallelism) == (2, 32)


def test_a_defined_default_connection_is_used(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(monkeypatch, "finegrained_spark_default", host="local[1]", extra={"storage_root": "/data/fg"})
    hook = FineGrainedSparkHook()
    assert hook.get_settings().storage_root == "/data/fg"
    assert not hook.used_embedded_default


def test_missing_other_connection_is_a_clear_error() -> None:
    with pytest.raises(AirflowNotFoundException) as info:
        FineGrainedSparkHook("my_spark").get_settings()
    message = str(info.value)
    assert "the finegrained_spark connection 'my_spark' is not defined" in message
    assert "airflow connections add my_spark --conn-type finegrained_spark" in message
    assert "AIRFLOW_CONN_MY_SPARK=" in message


@pytest.mark.security
def test_bad_extras_name_the_connection_and_the_field(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(monkeypatch, "fg_bad", host="local[2]", extra={"max_parallelism": "lots", "deploy_mode": "cluser"})
    with pytest.raises(ConnectionSettingsError) as info:
        FineGrainedSparkHook("fg_bad").get_settings()
    assert info.value.problems == (
        "connection 'fg_bad': deploy_mode: 'cluser' is not one of 'client', 'cluster'",
        "connection 'fg_bad': max_parallelism: 'lots' is not an integer; allowed: an integer >= 1",
    )


@pytest.mark.security
def test_malformed_extra_json_is_an_error_not_an_empty_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(monkeypatch, "fg_json", host="local[2]", extra='{"max_parallelism": 8')
    with pytest.raises(ConnectionSettingsError, match="extra: not valid JSON"):
        FineGrainedSparkHook("fg_json").get_settings()


@pytest.mark.security
def test_another_connection_type_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(monkeypatch, "spark_default", conn_type="spark", host="spark://10.0.0.5", port=7077)
    with pytest.raises(ConnectionSettingsError, match="has conn_type 'spark'; allowed: 'finegrained_spark'"):
        FineGrainedSparkHook("spark_default").get_settings()


def test_generic_connection_type_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    # What `airflow connections add --conn-type finegrained_spark` stores where the provider is unknown.
    set_connection(monkeypatch, "fg_generic", conn_type="generic", host="local[1]")
    assert FineGrainedSparkHook("fg_generic").get_settings().master == "local[1]"


def test_port_field_is_joined_to_a_standalone_host(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(monkeypatch, "fg_port", host="spark://10.0.0.5", port=7077, extra={"total_cores": 4})
    assert FineGrainedSparkHook("fg_port").get_settings().master == "spark://10.0.0.5:7077"


# -- secrets --------------------------------------------------------------------------------------------


@pytest.fixture
def masked_log(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Iterator[logging.Logger]:
    """A logger whose records pass through Airflow's secrets masker, as task logs do."""
    monkeypatch.setattr(SecretsMasker, "mask_secrets_in_logs", True)
    masker = _secrets_masker()
    caplog.handler.addFilter(masker)
    caplog.set_level(logging.INFO)
    try:
        yield logging.getLogger("tests.finegrained.masked")
    finally:
        caplog.handler.removeFilter(masker)


@pytest.mark.security
def test_spark_conf_secret_never_reaches_a_log_record(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, masked_log: logging.Logger
) -> None:
    # A key that only our rule (ends in .key) calls secret: Airflow's own name list would not mask it.
    secret = "Zm9vYmFyLXNpZ25pbmcta2V5LTQy"
    conf = {"spark.hadoop.fs.example.signing.key": secret, "spark.eventLog.enabled": "true"}
    set_connection(monkeypatch, "fg_secret", host="local[1]", extra={"spark_conf": conf})
    masked_log.info("probe before the hook: %s", secret)
    assert secret in caplog.text  # the masker does not know it yet
    caplog.clear()

    settings = FineGrainedSparkHook("fg_secret").get_settings()
    masked_log.info("conf as a careless operator logs it: %s", dict(settings.spark_conf))
    masked_log.info("spark-submit --conf spark.hadoop.fs.example.signing.key=%s", secret)
    assert secret not in caplog.text
    assert "***" in caplog.text
    assert settings.redacted()["spark_conf"]["spark.hadoop.fs.example.signing.key"] == "***"


@pytest.mark.security
def test_password_and_storage_url_password_are_masked(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, masked_log: logging.Logger
) -> None:
    set_connection(
        monkeypatch,
        "fg_pw",
        host="spark://10.0.0.5:7077",
        password="shared-auth-secret-123",
        extra={"total_cores": 2, "storage_root": "s3://AKIDEXAMPLE:url-password-456@bucket/x"},
    )
    hook = FineGrainedSparkHook("fg_pw")
    settings = hook.get_settings()
    assert settings.spark_conf["spark.authenticate.secret"] == "shared-auth-secret-123"
    assert settings.spark_conf["spark.authenticate"] == "true"
    masked_log.info("settings: %s %s %s", dict(settings.spark_conf), settings.storage_root, settings)
    masked_log.info("the Mapping itself: %s", settings.spark_conf)
    assert "shared-auth-secret-123" not in caplog.text
    assert "url-password-456" not in caplog.text
    assert "AKIDEXAMPLE:***@bucket" in caplog.text


@pytest.mark.security
def test_warm_pool_connect_token_is_masked_in_logs(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    masked_log: logging.Logger,
) -> None:
    token = "sc-token-5b2e9d"
    set_connection(monkeypatch, "fg_sc", host="local[1]", extra={"warm_pool": f"sc://127.0.0.1:15002/;token={token}"})
    settings = FineGrainedSparkHook("fg_sc").get_settings()
    assert token not in hook_log(capfd)  # the hook's own line shows the redacted settings
    masked_log.info("pool: %s; settings: %s", settings.warm_pool, settings)
    assert token not in caplog.text  # registered with the masker, so even the raw URL is hidden
    assert "sc://127.0.0.1:15002/;token=***" in caplog.text


@pytest.mark.security
def test_the_hook_logs_only_redacted_settings(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # Outside a task nothing masks the hook's console log: its own line must already be clean.
    secret = "plain-log-token-789"
    set_connection(monkeypatch, "fg_plain", host="local[1]", extra={"spark_conf": {"spark.x.token": secret}})
    FineGrainedSparkHook("fg_plain").get_settings()
    log = hook_log(capfd)
    assert "Connection 'fg_plain'" in log and "'spark.x.token': '***'" in log
    assert secret not in log


def test_local_storage_with_a_cluster_master_warns(
    monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    set_connection(monkeypatch, "fg_warn", host="yarn", extra={"total_cores": 4, "storage_root": "/mnt/shared"})
    FineGrainedSparkHook("fg_warn").get_settings()
    assert "storage_root /mnt/shared is a local path but master yarn runs executors elsewhere" in hook_log(capfd)


# -- test_connection (the checks themselves: tests/hooks/test_test_connection.py) -------------------------


def test_test_connection_old_java_fails(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\necho 'java version \"1.8.0_392\"' >&2\n")
    java.chmod(0o755)
    set_connection(monkeypatch, "fg_java8", host="local[1]", extra={"java_home": str(tmp_path)})
    ok, message = FineGrainedSparkHook("fg_java8").test_connection()
    assert not ok and "java FAILED: Spark needs Java 17 or newer" in message and "Java 8" in message


def test_java_check_without_the_spark_module(tmp_path: Path) -> None:
    # The fallback used when airflow_provider_finegrained.spark.java is absent.
    java = tmp_path / "bin" / "java"
    java.parent.mkdir()
    java.write_text("#!/bin/sh\necho 'openjdk version \"21\" 2023-09-19' >&2\n")
    java.chmod(0o755)
    assert check_java_directly(str(tmp_path)) == (True, f"Java 21 at {java}")
    java.write_text("#!/bin/sh\necho 'java version \"1.8.0_392\"' >&2\n")
    ok, message = check_java_directly(str(tmp_path))
    assert not ok and "Java 8" in message
    assert check_java_directly(str(tmp_path / "missing"))[0] is False


# A malformed AIRFLOW_CONN_* variable must never silently become local Spark (issue 34, item 4).


@pytest.mark.security
@pytest.mark.parametrize("value", ["local[4]", "spark-master-7077", "hunter2-the-password"])
def test_an_env_connection_without_a_conn_type_is_refused(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    # Airflow parses a bare "local[4]" as a URI with an empty scheme: no conn_type, no host.
    monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", value)
    hook = FineGrainedSparkHook()
    with pytest.raises(ConnectionSettingsError) as info:
        hook.get_settings()
    message = str(info.value)
    assert "connection 'finegrained_spark_default' has no conn_type" in message
    assert "conn_type must be 'finegrained_spark'" in message
    assert 'AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT=\'{"conn_type": "finegrained_spark"' in message
    assert "finegrained-spark://" in message  # the URI form too
    assert value not in message  # the variable may hold a password: it is named, never echoed
    assert not hook.used_embedded_default


@pytest.mark.security
def test_a_stored_connection_without_a_conn_type_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    set_connection(monkeypatch, "fg_untyped", conn_type="", host="local[2]")
    with pytest.raises(ConnectionSettingsError, match="connection 'fg_untyped' has no conn_type; conn_type must be"):
        FineGrainedSparkHook("fg_untyped").get_settings()


@pytest.mark.security
@pytest.mark.parametrize("conn_id", ["finegrained_spark_default", "fg_broken"])
def test_an_env_connection_airflow_cannot_read_is_an_error_not_the_embedded_default(
    monkeypatch: pytest.MonkeyPatch, conn_id: str
) -> None:
    # JSON without its closing brace: Airflow cannot parse it and calls the connection "not defined".
    broken = '{"conn_type": "finegrained_spark", "host": "local[2]", "password": "s3cr3t-pw"'
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", broken)
    hook = FineGrainedSparkHook(conn_id)
    with pytest.raises(ConnectionSettingsError) as info:
        hook.get_settings()
    message = str(info.value)
    assert f"AIRFLOW_CONN_{conn_id.upper()} is set but Airflow cannot read connection {conn_id!r} from it" in message
    assert '{"conn_type": "finegrained_spark", "host": "local[*]"}' in message
    assert "s3cr3t-pw" not in message and "local[2]" not in message
    assert not hook.used_embedded_default


@pytest.mark.security
def test_an_empty_env_variable_is_unset_as_airflow_reads_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", "")
    hook = FineGrainedSparkHook()
    assert hook.get_settings().is_local and hook.used_embedded_default


@pytest.mark.security
def test_both_forms_the_errors_suggest_are_read_as_the_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_finegrained.hooks.airflow_connection import connection_forms

    forms = connection_forms("fg_forms").split(" or ")
    assert len(forms) == 2
    for form in forms:
        value = form.split("=", 1)[1].rsplit(" (", 1)[0].strip("'")
        monkeypatch.setenv("AIRFLOW_CONN_FG_FORMS", value)
        settings = FineGrainedSparkHook("fg_forms").get_settings()
        assert settings.is_local and settings.master.startswith("local[")
