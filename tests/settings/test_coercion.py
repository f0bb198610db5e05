"""Coercion and validation of every setting, as tables of cases: raw strings as the CLI, the environment
and the extras hold them become typed values; a bad value is an error naming the setting and what is allowed."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_finegrained.settings import (
    ConnectionSettings,
    ConnectionSettingsError,
    ParallelismSettings,
    ResourceSettings,
    settable_fields,
    setting_of,
)

MiB, GiB = 2**20, 2**30
HOME = "/srv/airflow"
STANDALONE = "spark://127.0.0.1:7077"


def parse(host: str | None = STANDALONE, **extras: Any) -> ConnectionSettings:
    extras.setdefault("total_cores", 8)
    return ConnectionSettings.from_connection_fields(host, extras, airflow_home=HOME)


def problems(host: str | None = STANDALONE, **extras: Any) -> tuple[str, ...]:
    with pytest.raises(ConnectionSettingsError) as info:
        parse(host, **extras)
    return info.value.problems


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        # integer
        ("max_parallelism", "16", 16),
        ("max_parallelism", " 16 ", 16),
        ("max_parallelism", 16.0, 16),
        ("min_slots", "0", 0),
        # number
        ("max_broadcast_ratio", "0.25", 0.25),
        ("max_broadcast_ratio", 0, 0.0),
        ("capacity_poll_interval", "0.1", 0.1),
        # boolean
        ("adaptive_query_execution", "false", False),
        ("adaptive_query_execution", "OFF", False),
        ("learn_from_history", "yes", True),
        ("learn_from_history", 1, True),
        # bytes (Spark's binary units)
        ("avg_bytes_per_task", "64m", 64 * MiB),
        ("avg_bytes_per_task", 1024, 1024),
        ("executor_memory", "1.5GiB", 3 * GiB // 2),
        ("driver_memory", "2g", 2 * GiB),
        ("min_memory", "0", 0),
        # choice, case-insensitive
        ("deploy_mode", " CLUSTER ", "cluster"),
        ("normalize", "Power_Of_Two", "power_of_two"),
        ("admission", "cluster_queue", "cluster_queue"),
        ("executors_from", "START", "start"),
        ("python_env", "off", "off"),
        # strings, each with its own check
        ("spark_home", "/opt/spark/", "/opt/spark"),
        ("java_home", "/usr/lib/jvm/../jvm/java-17", "/usr/lib/jvm/java-17"),
        ("storage_root", "S3://bucket/prefix/", "s3://bucket/prefix"),
        ("storage_root", "/data/fg/", "/data/fg"),
        ("storage_conn_id", "aws_default", "aws_default"),
        ("master_webui_url", "http://ui:8080/", "http://ui:8080"),
        ("warm_pool", "sc://pool:15002", "sc://pool:15002"),
        ("warm_pool", "conn:spark_connect", "conn:spark_connect"),
        # a JSON object, values as Spark's strings
        ("spark_conf", '{"spark.eventLog.enabled": true}', {"spark.eventLog.enabled": "true"}),
        ("spark_conf", {"spark.sql.broadcastTimeout": 600}, {"spark.sql.broadcastTimeout": "600"}),
    ],
)
def test_a_raw_value_becomes_its_typed_value(name: str, raw: Any, expected: Any) -> None:
    value = getattr(parse(**{name: raw}), name)
    assert (dict(value) if name == "spark_conf" else value) == expected
    assert setting_of(name).parse(name, raw) == expected  # the declaration's coercion, alone


# A bad value of each kind; strings have checks of their own.
BAD_BY_KIND: dict[str, Any] = {
    "integer": "eight",
    "number": "many",
    "boolean": "maybe",
    "bytes": "lots",
    "choice": "sometimes",
    "object": "[1, 2]",
}
BAD_STRINGS: dict[str, Any] = {
    "master": "mesos://m:5050",
    "spark_home": "relative/spark",
    "java_home": "relative/java",
    "master_webui_url": "ftp://ui",
    "yarn_resourcemanager_url": "resourcemanager:8088",
    "hadoop_conf_dir": "etc/hadoop",
    "history_server_url": "not a url",
    "storage_root": "relative/storage",
    "storage_conn_id": "no spaces allowed",
    "gpu_discovery_script": "gpus.sh",
    "warm_pool": "on",
    "class_archive": "relative/spark.jsa",
}


def bad_value(name: str) -> Any:
    spec = setting_of(name)
    return BAD_STRINGS[name] if spec.kind == "string" else BAD_BY_KIND[spec.kind]


@pytest.mark.parametrize("name", settable_fields())
def test_a_bad_value_names_the_setting_and_what_is_allowed(name: str) -> None:
    raw = bad_value(name)
    found = problems(raw) if name == "master" else problems(**{name: raw})  # the master is the host field
    assert len(found) == 1, found
    message = found[0]
    assert message.startswith(f"{name}: "), message
    assert repr(raw) in message, message  # the value given
    spec = setting_of(name)
    if spec.choices:
        assert all(repr(choice) in message for choice in spec.choices), message
    else:
        assert "allowed: " in message, message


@pytest.mark.parametrize(
    ("name", "raw", "allowed"),
    [
        ("max_parallelism", "0", "allowed: an integer >= 1"),
        ("min_slots", "-1", "allowed: an integer >= 0"),
        ("max_broadcast_ratio", "1", "allowed: a number in [0, 1)"),
        ("capacity_poll_interval", "0", "allowed: a number >= 0.1"),
        ("total_gpus", "inf", "allowed: a number >= 0"),
        ("executor_memory", "100m", "allowed: at least 450.0 MiB (Spark's minimum for a JVM)"),
        ("avg_bytes_per_task", "0", "allowed: at least 1 B"),
        ("max_parallelism", True, "allowed: an integer >= 1"),
        ("spark_conf", '{"spark.executor.cores": "4"}', "set executor_cores instead"),
        ("spark_conf", '{"eventLog": "true"}', "allowed: Spark properties"),
        ("storage_root", "s3://", "allowed: a URL like s3://bucket/prefix"),
    ],
)
def test_out_of_range_values_say_the_bounds(name: str, raw: Any, allowed: str) -> None:
    (message,) = problems(**{name: raw})
    assert message.startswith(f"{name}: ") and allowed in message, message


def test_every_bad_field_is_reported_at_once() -> None:
    found = problems(max_parallelism="x", deploy_mode="y", storage_root="z")
    assert [p.split(":")[0] for p in found] == ["deploy_mode", "storage_root", "max_parallelism"]


@pytest.mark.parametrize(
    ("host", "extras", "names", "fragment"),
    [
        ("local[2]", {"deploy_mode": "cluster"}, "deploy_mode", "allowed: 'client'"),
        ("local[2]", {"total_cores": 4}, "total_cores", "allowed: at most 2"),
        ("local[2]", {"admission": "cluster_queue"}, "admission", "allowed: 'fit_now'"),
        (STANDALONE, {"total_cores": 2, "executor_cores": 4}, "executor_cores", "allowed: at most 2"),
        (STANDALONE, {"total_memory": "1g", "executor_memory": "1g"}, "total_memory", "allowed: at least"),
        (STANDALONE, {"min_parallelism": 32, "max_parallelism": 8}, "min_parallelism", "max_parallelism"),
        (STANDALONE, {"min_slots": 16}, "min_slots", "above total_cores (8)"),
        ("local-cluster[2,1,1024]", {"executor_cores": 2}, "executor_cores", "allowed: at most 1"),
        (STANDALONE, {"total_cores": None}, "total_cores", "required for master"),
    ],
)
def test_settings_that_disagree_are_refused_naming_them(
    host: str, extras: dict[str, Any], names: str, fragment: str
) -> None:
    extras = {**({} if host.startswith("local") else {"total_cores": 8}), **extras}  # local masters imply it
    with pytest.raises(ConnectionSettingsError) as info:
        ConnectionSettings.from_connection_fields(
            host, {k: v for k, v in extras.items() if v is not None}, airflow_home=HOME
        )
    (message,) = info.value.problems
    assert message.startswith(names) and fragment in message, message


@pytest.mark.parametrize(
    ("concern", "values", "problem"),
    [
        (ParallelismSettings, {"normalize": "pow2"}, "normalize: 'pow2' is not one of 'none', 'power_of_two'"),
        (
            ParallelismSettings,
            {"max_parallelism": "0"},
            "max_parallelism: '0' is out of range; allowed: an integer >= 1",
        ),
        (ResourceSettings, {"total_cores": 4}, "storage_root"),
    ],
)
def test_a_concern_alone_validates_with_the_same_messages(
    concern: type[Any], values: dict[str, Any], problem: str
) -> None:
    if problem == "storage_root":  # a field of another concern is unknown to this one
        with pytest.raises(ConnectionSettingsError, match="storage_root: unknown setting"):
            concern(**values, total_memory="8g", storage_root="/data")
        return
    with pytest.raises(ConnectionSettingsError) as info:
        concern(**values)
    assert info.value.problems == (problem,)
