"""ConnectionSettings: coercion of CLI strings, defaults, validation messages, derived views (pure)."""

from __future__ import annotations

import copy
import json
import pickle
import subprocess
import sys
from typing import Any

import pytest

from airflow_provider_finegrained import secrets
from airflow_provider_finegrained.planning import (
    DEFAULT_AVG_BYTES_PER_TASK,
    ParallelismConfig,
    ResourceSpec,
    StageDemand,
    size_region,
)
from airflow_provider_finegrained.secrets import is_secret_key as is_secret_conf_key
from airflow_provider_finegrained.secrets import redact_url
from airflow_provider_finegrained.settings import (
    ClusterSettings,
    ConnectionSettings,
    ConnectionSettingsError,
    HistorySettings,
    ParallelismSettings,
    ResourceSettings,
    Setting,
    StorageSettings,
    WarmPoolSettings,
    settable_fields,
    setting_of,
)
from airflow_provider_finegrained.settings.cluster import available_cpus, parse_master

MiB = 2**20
GiB = 2**30
HOME = "/srv/airflow"
STANDALONE = "spark://127.0.0.1:7077"


def parse(host: str | None = "local[4]", defaults: dict[str, Any] | None = None, **extras: Any) -> ConnectionSettings:
    return ConnectionSettings.from_connection_fields(host, extras, defaults=defaults or {}, airflow_home=HOME)


def problems(host: str | None = "local[4]", defaults: dict[str, Any] | None = None, **extras: Any) -> str:
    with pytest.raises(ConnectionSettingsError) as info:
        parse(host, defaults, **extras)
    assert isinstance(info.value, ValueError)
    return str(info.value)


def test_settings_form_and_docs_import_without_airflow_or_spark() -> None:
    # The planner and the CLI build settings without paying for (or needing) an Airflow import.
    code = (
        "import sys, airflow_provider_finegrained.settings, airflow_provider_finegrained.settings.form,"
        " airflow_provider_finegrained.settings.docs;"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'pyspark', 'py4j')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "[]"


# -- the embedded default and derived defaults ----------------------------------------------------


def test_embedded_default_is_local_spark_on_this_machine() -> None:
    cpus = available_cpus()
    settings = ConnectionSettings.from_connection_fields(None, {}, airflow_home=HOME)
    assert settings.master == f"local[{cpus}]"
    assert settings.is_local and settings.master_kind == "local"
    assert settings.storage_root == "/srv/airflow/finegrained/storage"
    assert (settings.total_cores, settings.total_memory) == (cpus, 2 * GiB)
    assert (settings.executor_cores, settings.executor_memory, settings.driver_memory) == (2, 2 * GiB, 2 * GiB)
    assert (settings.min_parallelism, settings.max_parallelism) == (1, 128)
    assert settings.avg_bytes_per_task == DEFAULT_AVG_BYTES_PER_TASK
    assert (settings.max_broadcast_ratio, settings.normalize, settings.default_source_parallelism) == (
        0.5,
        "none",
        None,
    )
    assert settings.adaptive_query_execution is True
    assert (settings.learn_from_history, settings.history_min_runs) == (True, 3)
    assert dict(settings.spark_conf) == {} and settings.secret_conf_keys == frozenset()
    assert settings.deploy_mode == "client" and settings.spark_home is None and settings.java_home is None
    assert settings.warm_pool == "off"  # a defined connection without the field runs cold
    embedded = ConnectionSettings.embedded_default(airflow_home=HOME)
    assert embedded == settings.replace(warm_pool="auto")


def test_embedded_default_runs_warm_unless_the_config_section_says_otherwise() -> None:
    assert ConnectionSettings.embedded_default(airflow_home=HOME).warm_pool == "auto"
    chosen = ConnectionSettings.embedded_default(airflow_home=HOME, defaults={"warm_pool": "off"})
    assert chosen.warm_pool == "off"


def test_airflow_home_with_tilde_is_expanded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/ada")
    settings = ConnectionSettings.from_connection_fields(None, {}, airflow_home="~/airflow")
    assert settings.storage_root == "/home/ada/airflow/finegrained/storage"


@pytest.mark.parametrize(
    ("master", "cores", "memory"),
    [
        pytest.param("local", 1, 2 * GiB, id="local-is-one-thread"),
        pytest.param("local[3]", 3, 2 * GiB, id="local-n"),
        pytest.param("local[*]", available_cpus(), 2 * GiB, id="local-star"),
        pytest.param("local[3,2]", 3, 2 * GiB, id="local-n-failures"),
        pytest.param("local[*,4]", available_cpus(), 2 * GiB, id="local-star-failures"),
        pytest.param("local-cluster[2,1,1024]", 2, 2 * GiB, id="local-cluster-n-times-c-and-m"),
    ],
)
def test_local_masters_imply_capacity(master: str, cores: int, memory: int) -> None:
    settings = parse(master)
    assert (settings.total_cores, settings.total_memory) == (cores, memory)


def test_local_total_memory_is_the_driver_memory() -> None:
    assert parse("local[2]", driver_memory="3g").total_memory == 3 * GiB


def test_local_cluster_defaults_to_one_executor_per_worker() -> None:
    settings = parse("local-cluster[2,1,1024]")
    assert (settings.executor_cores, settings.executor_memory) == (1, 1024 * MiB)
    assert not settings.is_local and settings.master_kind == "local-cluster"
    profile = settings.cluster_profile()
    assert (profile.local, profile.executor_cores, profile.executor_memory) == (False, 1, 1024 * MiB)


@pytest.mark.parametrize("master", [STANDALONE, "yarn", "k8s://https://10.0.0.1:6443"])
def test_cluster_masters_require_total_cores(master: str) -> None:
    message = problems(master)
    assert f"total_cores: required for master {master!r}" in message
    assert "an integer >= 1" in message


def test_cluster_total_memory_defaults_to_executors_that_fit_the_cores() -> None:
    # 9 cores / 2 per executor = 4 executors of 2 GiB + 384 MiB overhead (10% of 2 GiB is less).
    assert parse(STANDALONE, total_cores="9").total_memory == 4 * (2 * GiB + 384 * MiB)
    # 8 GiB executors: the overhead is 10%.
    assert parse("yarn", total_cores=4, executor_memory="8g").total_memory == 2 * (8 * GiB + int(0.8 * GiB))


# -- coercion of strings as the CLI stores them ----------------------------------------------------


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("deploy_mode", "client", "client"),
        ("deploy_mode", " Client ", "client"),
        ("storage_root", "/data/fg/", "/data/fg"),
        ("storage_root", "/data//fg/../fg2", "/data/fg2"),
        ("storage_root", "s3://bucket/prefix/", "s3://bucket/prefix"),
        ("storage_root", "S3://bucket", "s3://bucket"),
        ("storage_root", "hdfs:///warehouse/fg", "hdfs:///warehouse/fg"),
        ("storage_root", "file:///tmp/fg", "file:///tmp/fg"),
        ("total_memory", "3g", 3 * GiB),
        ("total_cores", "3", 3),
        ("total_cores", 3.0, 3),
        ("executor_cores", "1", 1),
        ("executor_memory", "1536m", 1536 * MiB),
        ("executor_memory", "1.5GiB", 1536 * MiB),
        ("executor_memory", str(GiB), GiB),
        ("executor_memory", GiB, GiB),
        ("driver_memory", "1g", GiB),
        ("min_parallelism", "2", 2),
        ("max_parallelism", " 64 ", 64),
        ("max_parallelism", 64, 64),
        ("avg_bytes_per_task", "128m", 128 * MiB),
        ("avg_bytes_per_task", 1000, 1000),
        ("max_broadcast_ratio", "0.25", 0.25),
        ("max_broadcast_ratio", 0, 0.0),
        ("normalize", "power_of_two", "power_of_two"),
        ("normalize", "NONE", "none"),
        ("default_source_parallelism", "8", 8),
        ("adaptive_query_execution", "false", False),
        ("adaptive_query_execution", "False", False),
        ("adaptive_query_execution", "true", True),
        ("adaptive_query_execution", "0", False),
        ("adaptive_query_execution", "yes", True),
        ("adaptive_query_execution", False, False),
        ("learn_from_history", "false", False),
        ("history_min_runs", "5", 5),
        ("spark_home", "/opt/spark/", "/opt/spark"),
        ("java_home", "/usr/lib/jvm/java-17", "/usr/lib/jvm/java-17"),
        ("master_webui_url", "http://127.0.0.1:8080/", "http://127.0.0.1:8080"),
        ("min_slots", "0", 0),
        ("max_slots", "4", 4),
        ("min_memory", "1g", GiB),
        ("max_memory", "8g", 8 * GiB),
        ("min_cpu", "0.5", 0.5),
        ("max_cpu", "4", 4.0),
        ("history_server_url", "http://history:18080/", "http://history:18080"),
        ("warm_pool", "auto", "auto"),
        ("warm_pool", "sc://127.0.0.1:15002", "sc://127.0.0.1:15002"),
        ("warm_idle_timeout", "0", 0.0),
    ],
)
def test_strings_are_coerced(name: str, raw: Any, expected: Any) -> None:
    settings = parse("local[4]", **{name: raw})
    assert getattr(settings, name) == expected
    assert type(getattr(settings, name)) is type(expected)


def test_spark_conf_json_string_is_parsed_and_values_become_strings() -> None:
    conf = '{"spark.eventLog.enabled": true, "spark.ui.port": 4050, "spark.speculation.multiplier": 1.5}'
    settings = parse(spark_conf=conf)
    assert dict(settings.spark_conf) == {
        "spark.eventLog.enabled": "true",
        "spark.ui.port": "4050",
        "spark.speculation.multiplier": "1.5",
    }


def test_spark_conf_mapping_is_read_only_hashable_and_copyable() -> None:
    settings = parse(spark_conf={"spark.ui.enabled": "false"})
    with pytest.raises(TypeError):
        settings.spark_conf["spark.x"] = "y"  # type: ignore[index]
    assert hash(settings) == hash(parse(spark_conf={"spark.ui.enabled": "false"}))
    assert pickle.loads(pickle.dumps(settings)) == settings
    assert copy.deepcopy(settings) == settings


@pytest.mark.parametrize("empty", [None, "", "  "])
def test_empty_extras_count_as_unset(empty: Any) -> None:
    # Airflow's form stores untouched fields as null or "".
    settings = parse("local[2]", max_parallelism=empty, executor_memory=empty, spark_conf=empty)
    assert (settings.max_parallelism, settings.executor_memory, dict(settings.spark_conf)) == (128, 2 * GiB, {})


def test_legacy_prefixed_extras_are_accepted() -> None:
    settings = parse("local[2]", extra__finegrained_spark__max_parallelism="16")
    assert settings.max_parallelism == 16


# -- the master URL ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("master", "kind"),
    [
        ("local", "local"),
        ("local[1]", "local"),
        ("local[*]", "local"),
        ("local[2,3]", "local"),
        ("local[*, 3]", "local"),
        ("local-cluster[2,1,1024]", "local-cluster"),
        ("local-cluster[ 2 , 1 , 1024 ]", "local-cluster"),
        ("spark://127.0.0.1:7077", "standalone"),
        ("spark://m1.example.com:7077,m2.example.com:7077", "standalone"),
        ("spark://[::1]:7077", "standalone"),
        ("yarn", "yarn"),
        ("k8s://https://10.0.0.1:6443", "k8s"),
        ("k8s://https://kubernetes.default.svc", "k8s"),
        ("k8s://10.0.0.1:6443", "k8s"),
    ],
)
def test_accepted_master_urls(master: str, kind: str) -> None:
    assert parse_master(master).kind == kind
    capacity: dict[str, Any] = {} if kind in ("local", "local-cluster") else {"total_cores": 2}
    settings = parse(master, **capacity)
    assert settings.master == master and settings.master_kind == kind


@pytest.mark.parametrize(
    "master",
    [
        "mesos://10.0.0.1:5050",
        "local[0]",
        "local[ 2 ]",  # Spark's own pattern has no spaces here
        "local[two]",
        "local-cluster[2,1]",
        "spark://127.0.0.1",
        "spark://127.0.0.1:99999",
        "spark://",
        "yarn-client",
        "YARN",
        "k8s://",
        "http://127.0.0.1:7077",
    ],
)
def test_rejected_master_urls_name_the_value_and_the_forms(master: str) -> None:
    message = problems(master, total_cores=2)
    assert f"master: {master!r} is not a Spark master URL" in message
    assert (
        "allowed: local, local[N], local[*], local[N,F], local-cluster[N,C,M], spark://host:port[,host:port]" in message
    )
    assert "yarn, k8s://https://host:port" in message


def test_master_from_extra_or_config_when_host_is_empty() -> None:
    assert parse(None, master="local[2]").master == "local[2]"
    assert parse("", defaults={"master": "local[3]"}).master == "local[3]"
    assert parse("local[1]", defaults={"master": "local[3]"}).master == "local[1]"


def test_host_and_master_extra_must_agree() -> None:
    assert parse("local[2]", master="local[2]").master == "local[2]"
    message = problems("local[2]", master="yarn")
    assert "master: the host field ('local[2]') and the extra 'master' ('yarn') disagree" in message


def test_bad_master_from_config_names_the_config_option() -> None:
    assert "[finegrained] master: 'mesos://x:1' is not a Spark master URL" in problems(
        None, defaults={"master": "mesos://x:1"}
    )


def test_port_field_completes_a_standalone_host() -> None:
    # A URI connection (finegrained-spark://spark://host:7077) splits the port off the host.
    settings = ConnectionSettings.from_connection_fields(
        "spark://10.1.2.3", {"total_cores": 4}, airflow_home=HOME, port=7077
    )
    assert settings.master == "spark://10.1.2.3:7077"
    assert parse_master(settings.master).hosts == (("10.1.2.3", 7077),)


# -- bad values: every message names the field, the value and what is allowed -------------------------


@pytest.mark.parametrize(
    ("name", "raw", "expected"),
    [
        ("deploy_mode", "cluser", "deploy_mode: 'cluser' is not one of 'client', 'cluster'"),
        ("storage_root", "relative/dir", "storage_root: 'relative/dir' is neither an absolute path nor a URL"),
        ("storage_root", "s3://", "storage_root: 's3://' has no location after 's3://'"),
        ("storage_root", 42, "storage_root: 42 is not a non-empty string"),
        ("total_cores", "four", "total_cores: 'four' is not an integer; allowed: an integer >= 1"),
        ("total_cores", "0", "total_cores: '0' is out of range; allowed: an integer >= 1"),
        ("total_memory", "lots", "total_memory: 'lots' is not a byte size; allowed: a byte count or a size like"),
        ("executor_cores", "2.5", "executor_cores: '2.5' is not an integer"),
        ("executor_cores", True, "executor_cores: True is not an integer"),
        ("executor_memory", "-1g", "executor_memory: '-1g' is not a byte size"),
        ("executor_memory", "256m", "executor_memory: '256m' is too small; allowed: at least 450.0 MiB"),
        ("driver_memory", "2 gigs", "driver_memory: '2 gigs' is not a byte size"),
        ("min_parallelism", "0", "min_parallelism: '0' is out of range; allowed: an integer >= 1"),
        ("max_parallelism", "lots", "max_parallelism: 'lots' is not an integer"),
        ("avg_bytes_per_task", "0", "avg_bytes_per_task: '0' is too small; allowed: at least 1 B"),
        ("max_broadcast_ratio", "half", "max_broadcast_ratio: 'half' is not a number; allowed: a number in [0, 1)"),
        ("max_broadcast_ratio", "1", "max_broadcast_ratio: '1' is out of range; allowed: a number in [0, 1)"),
        ("normalize", "pow2", "normalize: 'pow2' is not one of 'none', 'power_of_two'"),
        ("default_source_parallelism", "-3", "default_source_parallelism: '-3' is out of range"),
        (
            "adaptive_query_execution",
            "maybe",
            "adaptive_query_execution: 'maybe' is not a boolean; allowed: true, false",
        ),
        ("adaptive_query_execution", 2, "adaptive_query_execution: 2 is not a boolean"),
        ("learn_from_history", "maybe", "learn_from_history: 'maybe' is not a boolean; allowed: true, false"),
        ("history_min_runs", "0", "history_min_runs: '0' is out of range; allowed: an integer >= 1"),
        ("spark_conf", "{not json", "spark_conf: '{not json' is not a JSON object"),
        ("spark_conf", '["a"]', "spark_conf: '[\"a\"]' is not a JSON object"),
        ("spark_conf", {"executor.memory": "1g"}, "spark_conf: key 'executor.memory' does not start with 'spark.'"),
        ("spark_conf", {"spark.a": {"b": 1}}, "spark_conf: the value of 'spark.a' is {'b': 1}; allowed: a string"),
        ("spark_conf", {"spark.a": None}, "spark_conf: the value of 'spark.a' is None"),
        ("spark_home", "opt/spark", "spark_home: 'opt/spark' is not an absolute path"),
        ("java_home", "jdk17", "java_home: 'jdk17' is not an absolute path"),
        ("yarn_resourcemanager_url", "rm:8088", "yarn_resourcemanager_url: 'rm:8088' is not an http(s) URL"),
        ("capacity_wait_timeout", "-1", "capacity_wait_timeout: '-1' is out of range"),
        ("capacity_wait_timeout", "soon", "capacity_wait_timeout: 'soon' is not a number"),
        ("capacity_poll_interval", "0", "capacity_poll_interval: '0' is out of range"),
        ("master_webui_url", "127.0.0.1:8080", "master_webui_url: '127.0.0.1:8080' is not an http(s) URL"),
        ("min_slots", "-1", "min_slots: '-1' is out of range; allowed: an integer >= 0"),
        ("max_slots", "many", "max_slots: 'many' is not an integer"),
        ("min_memory", "x", "min_memory: 'x' is not a byte size"),
        ("max_memory", "-2g", "max_memory: '-2g' is not a byte size"),
        ("min_cpu", "-0.5", "min_cpu: '-0.5' is out of range; allowed: a number >= 0"),
        ("max_cpu", "inf", "max_cpu: 'inf' is not a number"),
        ("history_server_url", "history:18080", "history_server_url: 'history:18080' is not an http(s) URL"),
        ("warm_pool", "on", "warm_pool: 'on' is not a warm-pool setting; allowed: 'off', 'auto' or a Spark Connect"),
        ("warm_pool", "http://x:15002", "warm_pool: 'http://x:15002' is not a warm-pool setting"),
        ("warm_idle_timeout", "-5", "warm_idle_timeout: '-5' is out of range"),
    ],
)
def test_bad_values_name_field_value_and_allowed(name: str, raw: Any, expected: str) -> None:
    assert expected in problems("local[4]", **{name: raw})


@pytest.mark.parametrize(
    ("key", "hint"),
    [
        ("spark.master", "set the connection's host (master URL) instead"),
        ("spark.submit.deployMode", "set deploy_mode instead"),
        ("spark.executor.memory", "set executor_memory instead"),
        ("spark.executor.cores", "set executor_cores instead"),
        ("spark.driver.memory", "set driver_memory instead"),
        ("spark.sql.shuffle.partitions", "the planner decides it per stage"),
        ("spark.sql.adaptive.enabled", "set adaptive_query_execution instead"),
        ("spark.memory.fraction", "the planner decides it"),
    ],
)
def test_spark_conf_refuses_properties_that_fields_or_the_planner_own(key: str, hint: str) -> None:
    assert f"spark_conf: {key!r} is not allowed here: {hint}" in problems(spark_conf={key: "1"})


def test_unknown_extras_are_named_with_a_suggestion_and_the_known_list() -> None:
    message = problems(max_paralelism="8", colour="blue")
    assert "max_paralelism: unknown connection extra (did you mean 'max_parallelism'?)" in message
    # Known names are listed in declaration order, grouped by concern (cluster first, then storage...).
    assert "colour: unknown connection extra; known: master, deploy_mode, spark_conf" in message
    for name in settable_fields():
        assert name in message


def test_unknown_config_options_are_named_as_config() -> None:
    assert "max_paralelism: unknown [finegrained] option" in problems(defaults={"max_paralelism": "8"})


def test_all_problems_are_reported_at_once() -> None:
    with pytest.raises(ConnectionSettingsError) as info:
        parse("local[2]", deploy_mode="cluser", max_parallelism="lots", executor_memory="x")
    assert len(info.value.problems) == 3
    assert [p.split(":")[0] for p in info.value.problems] == ["deploy_mode", "executor_memory", "max_parallelism"]


# -- rules across fields -------------------------------------------------------------------------------


@pytest.mark.parametrize("master", ["local[2]", "local", "local-cluster[2,1,1024]"])
def test_cluster_deploy_mode_with_a_local_master_is_refused(master: str) -> None:
    message = problems(master, deploy_mode="cluster")
    assert f"deploy_mode: 'cluster' is not possible with master {master!r}" in message
    assert "allowed: 'client'" in message


@pytest.mark.parametrize("master", [STANDALONE, "yarn", "k8s://https://10.0.0.1:6443"])
def test_cluster_deploy_mode_on_cluster_managers(master: str) -> None:
    assert parse(master, deploy_mode="cluster", total_cores=8).deploy_mode == "cluster"


@pytest.mark.parametrize("master", ["local[2]", "local"])
def test_admission_cluster_queue_with_a_local_master_is_refused(master: str) -> None:
    message = problems(master, admission="cluster_queue")
    assert (
        f"admission: 'cluster_queue' needs a cluster manager that queues applications, and master {master!r}" in message
    )
    assert "allowed: 'fit_now'" in message
    assert parse(master).admission == "fit_now"


@pytest.mark.parametrize("master", [STANDALONE, "yarn", "k8s://https://10.0.0.1:6443", "local-cluster[2,1,1024]"])
def test_admission_cluster_queue_on_cluster_managers(master: str) -> None:
    assert parse(master, admission="cluster_queue", total_cores=8).admission == "cluster_queue"
    assert "admission: 'queue' is not one of" in problems(master, admission="queue", total_cores=8)


def test_total_cores_may_not_exceed_local_threads() -> None:
    assert parse("local[4]", total_cores=2).total_cores == 2
    message = problems("local[4]", total_cores=8)
    assert "total_cores: 8 is more than master 'local[4]' runs (4 threads); allowed: at most 4" in message


def test_local_cluster_executors_must_fit_a_worker() -> None:
    message = problems("local-cluster[2,1,1024]", executor_cores=2, executor_memory="2g")
    assert "executor_cores: 2 does not fit a worker of 'local-cluster[2,1,1024]' (1 cores)" in message
    assert "executor_memory: 2.0 GiB does not fit a worker of 'local-cluster[2,1,1024]' (1024 MiB)" in message


def test_cluster_capacity_must_hold_one_executor() -> None:
    message = problems(STANDALONE, total_cores=1, total_memory="1g", executor_cores=2)
    assert "executor_cores: 2 is more than total_cores (1); allowed: at most 1" in message
    assert (
        "total_memory: 1.0 GiB cannot hold one executor of executor_memory 2.0 GiB plus 384.0 MiB overhead" in message
    )


def test_min_parallelism_above_max_is_refused() -> None:
    message = problems(min_parallelism="200", max_parallelism="100")
    assert "min_parallelism (200) is above max_parallelism (100)" in message


def test_power_of_two_needs_a_power_between_the_bounds() -> None:
    assert "normalize='power_of_two' needs a power of two" in problems(
        normalize="power_of_two", min_parallelism=5, max_parallelism=7
    )


def test_minimum_resources_are_checked_for_stability() -> None:
    # Executors of 2 cores: min 3 slots needs 2 executors = 4 slots > max 3.
    ok = parse(STANDALONE, total_cores=8, min_slots="2", max_slots="4", min_memory="2g", max_memory="8g")
    assert (ok.min_slots, ok.max_slots, ok.min_memory, ok.max_memory) == (2, 4, 2 * GiB, 8 * GiB)
    message = problems(STANDALONE, total_cores=8, min_slots="3", max_slots="3")
    assert message.startswith("min_slots, max_slots: unstable minimum/maximum resources: min slots 3 needs 2 worker(s)")
    assert "min slots (5) is above max slots (4)" in problems(STANDALONE, total_cores=8, min_slots=5, max_slots=4)
    assert "min_cpu, max_cpu: " in problems(STANDALONE, total_cores=8, min_cpu="3", max_cpu="2.5")


def test_minimum_resources_must_fit_the_cluster() -> None:
    assert "min_slots: 9 is above total_cores (8), so it can never be met" in problems(
        STANDALONE, total_cores=8, min_slots=9
    )
    assert "min_memory: 64.0 GiB is above total_memory" in problems("local[2]", min_memory="64g")


def test_local_minimum_resources_use_the_driver_as_the_one_worker() -> None:
    # local[4]: one "worker" of 4 slots and driver_memory; min 2 slots needs 1 worker <= max 4.
    assert parse("local[4]", min_slots=2, max_slots=4).min_slots == 2
    assert "unstable minimum/maximum resources" in problems("local[4]", min_slots=2, max_slots=3)


def test_direct_construction_validates_too() -> None:
    settings = ConnectionSettings(master="local[2]", storage_root="/data", total_cores=2, total_memory=GiB)
    assert settings.executor_memory == 2 * GiB
    with pytest.raises(ConnectionSettingsError, match="deploy_mode: 'x' is not one of 'client', 'cluster'"):
        ConnectionSettings(master="local[2]", deploy_mode="x", storage_root="/data", total_cores=2, total_memory=GiB)


# -- installation defaults ------------------------------------------------------------------------------


def test_config_defaults_apply_under_the_connection() -> None:
    defaults = {"max_parallelism": "64", "executor_cores": "4", "storage_root": "s3://shared/fg"}
    settings = parse("local[2]", defaults=defaults, max_parallelism="16")
    assert (settings.max_parallelism, settings.executor_cores, settings.storage_root) == (16, 4, "s3://shared/fg")


def test_config_spark_conf_merges_per_key_under_the_connection() -> None:
    defaults = {"spark_conf": '{"spark.eventLog.enabled": "true", "spark.ui.port": "4050"}'}
    settings = parse("local[2]", defaults=defaults, spark_conf={"spark.ui.port": "4060"})
    assert dict(settings.spark_conf) == {"spark.eventLog.enabled": "true", "spark.ui.port": "4060"}


def test_bad_config_values_name_the_config_option() -> None:
    assert "[finegrained] max_parallelism: 'lots' is not an integer" in problems(defaults={"max_parallelism": "lots"})


def test_a_good_connection_value_hides_a_bad_default() -> None:
    # Only the value in effect is validated: the connection's overrides the installation's.
    assert parse(defaults={"max_parallelism": "lots"}, max_parallelism="8").max_parallelism == 8


# -- secrets and redaction -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        ("spark.ssl.keyPassword", True),
        ("spark.authenticate.secret", True),
        ("spark.hadoop.fs.s3a.session.token", True),
        ("spark.hadoop.google.cloud.auth.service.account.json.credentials", True),
        ("spark.hadoop.fs.s3a.access.key", True),
        ("spark.hadoop.fs.example.signing.KEY", True),
        ("spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net", True),
        ("spark.hadoop.fs.oss.accessKeyId", True),
        ("spark.hadoop.fs.s3a.server-side-encryption.keyring", False),
        ("spark.eventLog.dir", False),
        ("spark.io.encryption.keySizeBits", False),
        ("spark.sql.shuffle.partitions", False),
    ],
)
@pytest.mark.security
def test_secret_conf_keys(key: str, secret: bool) -> None:
    assert is_secret_conf_key(key) is secret


def test_secret_rules_are_the_shared_module_s() -> None:
    # One definition (airflow_provider_finegrained.secrets): the settings re-export it, they do not copy it.
    assert is_secret_conf_key is secrets.is_secret_key
    assert redact_url is secrets.redact_url


@pytest.mark.security
def test_redacted_masks_secrets_and_is_json_safe() -> None:
    settings = ConnectionSettings.from_connection_fields(
        "local[2]",
        {
            "spark_conf": {"spark.hadoop.fs.s3a.secret.key": "wJalrXUtnFEMI", "spark.eventLog.enabled": "true"},
            "storage_root": "s3://AKIDEXAMPLE:s3cr3tpass@bucket/prefix",
        },
        airflow_home=HOME,
        password="standalone-shared-secret",
    )
    assert settings.secret_conf_keys == {"spark.hadoop.fs.s3a.secret.key", "spark.authenticate.secret"}
    redacted = settings.redacted()
    text = json.dumps(redacted)
    for secret in ("wJalrXUtnFEMI", "s3cr3tpass", "standalone-shared-secret"):
        assert secret not in text
        assert secret not in repr(settings)
    assert "wJalrXUtnFEMI" not in repr(settings.spark_conf)  # log maskers format a Mapping untouched
    assert settings.spark_conf["spark.hadoop.fs.s3a.secret.key"] == "wJalrXUtnFEMI"  # code still reads it
    assert redacted["spark_conf"] == {
        "spark.authenticate": "true",
        "spark.authenticate.secret": "***",
        "spark.eventLog.enabled": "true",
        "spark.hadoop.fs.s3a.secret.key": "***",
    }
    assert redacted["storage_root"] == "s3://AKIDEXAMPLE:***@bucket/prefix"
    assert redacted["secret_conf_keys"] == ["spark.authenticate.secret", "spark.hadoop.fs.s3a.secret.key"]
    assert set(redacted) == {*settable_fields(), "secret_conf_keys"}
    assert sorted(settings.secret_values()) == ["s3cr3tpass", "standalone-shared-secret", "wJalrXUtnFEMI"]


TOKEN = "c0nnect-t0ken-4f9a"


@pytest.mark.parametrize(
    "url",
    [f"sc://127.0.0.1:15002/;token={TOKEN}", f"sc://pool.example.com:15002/;user_id=ada;token={TOKEN};use_ssl=true"],
)
@pytest.mark.security
def test_spark_connect_token_in_warm_pool_is_masked_everywhere(url: str) -> None:
    settings = parse(warm_pool=url)
    assert settings.warm_pool == url  # the launcher still connects with it
    assert TOKEN in settings.secret_values()  # so the hook registers it with Airflow's masker
    redacted = settings.redacted()
    assert redacted["warm_pool"] == url.replace(TOKEN, "***")
    for rendering in (json.dumps(redacted), repr(settings), str(settings), f"{settings}", repr([settings])):
        assert TOKEN not in rendering


@pytest.mark.security
def test_a_refused_warm_pool_url_does_not_leak_its_token() -> None:
    # No "/" before the parameters: Spark Connect's client refuses it, and so does the setting.
    message = problems(warm_pool=f"sc://h:15002;token={TOKEN}")
    assert "warm_pool: 'sc://h:15002;token=***' is not a warm-pool setting" in message
    assert "sc://spark-connect:15002/;token=..." in message
    assert TOKEN not in message


@pytest.mark.security
def test_secret_text_in_a_broken_spark_conf_is_not_repeated() -> None:
    message = problems(spark_conf='{"spark.authenticate.secret": "hunter22"')  # missing brace
    assert "spark_conf: a str (not shown) is not a JSON object" in message
    assert "hunter22" not in message
    assert "spark_conf: the value of 'spark.a.token' is ***; allowed" in problems(spark_conf={"spark.a.token": ["x"]})


def test_password_and_spark_conf_secret_conflict() -> None:
    with pytest.raises(ConnectionSettingsError, match="password: both the password field and spark_conf"):
        ConnectionSettings.from_connection_fields(
            "local[2]",
            {"spark_conf": {"spark.authenticate.secret": "abcdefgh"}},
            airflow_home=HOME,
            password="xyz12345",
        )


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("s3://key:secret@bucket/p", "s3://key:***@bucket/p"),
        ("s3://bucket/p", "s3://bucket/p"),
        ("/local/path", "/local/path"),
        ("http://user@host:8080", "http://user@host:8080"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


# -- views for the planner ---------------------------------------------------------------------------------


def test_parallelism_config_with_overrides() -> None:
    settings = parse(min_parallelism=2, max_parallelism=64, avg_bytes_per_task="32m", normalize="power_of_two")
    assert settings.parallelism_config() == ParallelismConfig(
        min_parallelism=2, max_parallelism=64, avg_bytes_per_task=32 * MiB, normalize="power_of_two"
    )
    assert settings.parallelism_config(max_parallelism=8).max_parallelism == 8
    assert settings.parallelism_config(default_source_parallelism=4).default_source_parallelism == 4


def test_cluster_profile_local_uses_the_driver_memory() -> None:
    profile = parse("local[3]", driver_memory="3g", executor_memory="1g").cluster_profile()
    assert (profile.local, profile.total_cores, profile.executor_cores) == (True, 3, 3)
    assert (profile.executor_memory, profile.total_memory) == (3 * GiB, 3 * GiB)


def test_cluster_profile_standalone() -> None:
    settings = parse(STANDALONE, total_cores=8, total_memory="20g", executor_cores=4, executor_memory="4g")
    profile = settings.cluster_profile()
    assert (profile.local, profile.total_cores, profile.total_memory) == (False, 8, 20 * GiB)
    assert (profile.executor_cores, profile.executor_memory) == (4, 4 * GiB)
    assert not settings.is_local


def test_a_connection_gpu_discovery_script_reaches_a_gpu_application() -> None:
    # Was dropped by cluster_profile(): the setting was accepted and never set on any application.
    script = "/opt/spark/examples/src/main/scripts/getGpusResources.sh"
    settings = parse("k8s://https://10.0.0.1:6443", total_cores=8, total_memory="32g", gpu_discovery_script=script)
    gpu = ResourceSpec(cpu_cores=1, heap_memory="1g", gpus=0.5)
    conf = size_region([StageDemand("infer", parallelism=4, resources=gpu)], settings.cluster_profile())
    assert conf.application_conf()["spark.executor.resource.gpu.discoveryScript"] == script
    # Not on an application without GPUs (Spark refuses a script without an amount), nor in local mode.
    plain = size_region([StageDemand("etl", parallelism=4)], settings.cluster_profile()).application_conf()
    assert "spark.executor.resource.gpu.discoveryScript" not in plain
    local = parse("local[2]", gpu_discovery_script=script).cluster_profile()
    assert (
        "spark.executor.resource.gpu.discoveryScript"
        not in size_region([StageDemand("infer", parallelism=2, resources=gpu)], local).application_conf()
    )


def test_webui_json_urls() -> None:
    ha = parse("spark://m1:7077,m2:7077", total_cores=2)
    assert ha.webui_json_urls() == ["http://m1:8080/json/", "http://m2:8080/json/"]
    assert parse(STANDALONE, total_cores=2, master_webui_url="http://ui:9090").webui_json_urls() == [
        "http://ui:9090/json/"
    ]
    assert parse("local[2]").webui_json_urls() == []


def test_storage_is_local() -> None:
    assert parse(storage_root="/data").storage_is_local
    assert parse(storage_root="file:///data").storage_is_local
    assert not parse(storage_root="gs://bucket/x").storage_is_local


# -- one declaration per setting, grouped by concern -----------------------------------------------------


CONCERNS = (ClusterSettings, StorageSettings, ResourceSettings, ParallelismSettings, HistorySettings, WarmPoolSettings)


def test_every_setting_is_declared_once_in_one_concern() -> None:
    declared = [name for concern in CONCERNS for name in concern.model_fields]
    assert len(declared) == len(set(declared))
    assert tuple(declared) == settable_fields()  # ConnectionSettings adds none of its own
    for name in settable_fields():
        spec = setting_of(name)
        assert isinstance(spec, Setting) and spec.label and spec.description and spec.example, name


@pytest.mark.parametrize(
    ("concern", "names"),
    [
        (ClusterSettings, {"master", "deploy_mode", "spark_conf", "spark_home", "java_home", "history_server_url"}),
        (StorageSettings, {"storage_root", "storage_conn_id"}),
        (ResourceSettings, {"total_cores", "executor_memory", "min_slots", "max_cpu", "capacity_wait_timeout"}),
        (ParallelismSettings, {"min_parallelism", "avg_bytes_per_task", "normalize", "adaptive_query_execution"}),
        (HistorySettings, {"learn_from_history", "history_min_runs"}),
        (WarmPoolSettings, {"warm_pool", "warm_idle_timeout"}),
    ],
)
def test_concerns_hold_their_settings(concern: type[Any], names: set[str]) -> None:
    assert names <= set(concern.model_fields)


def test_a_concern_validates_alone_with_the_same_coercion() -> None:
    parallelism = ParallelismSettings(max_parallelism="16", avg_bytes_per_task="32m", normalize="POWER_OF_TWO")
    assert (parallelism.max_parallelism, parallelism.avg_bytes_per_task, parallelism.normalize) == (
        16,
        32 * MiB,
        "power_of_two",
    )
    assert parallelism.parallelism_config().bounds == (1, 16)
    with pytest.raises(ConnectionSettingsError) as info:
        WarmPoolSettings(warm_pool="on", warm_idle_timeout="-1")
    assert [p.split(":")[0] for p in info.value.problems] == ["warm_pool", "warm_idle_timeout"]


def test_direct_construction_names_missing_and_unknown_settings() -> None:
    with pytest.raises(ConnectionSettingsError) as info:
        ConnectionSettings(master="local[2]", storage_root="/data", total_memory=GiB, colour="blue")
    assert info.value.problems[0].startswith("total_cores: required; allowed: Cores one Spark application may use")
    assert info.value.problems[1].startswith("colour: unknown setting; known: master, deploy_mode, ")


def test_settings_are_frozen() -> None:
    settings = parse()
    with pytest.raises(Exception, match="frozen"):
        settings.max_parallelism = 3  # type: ignore[misc]


def test_replace_validates_like_a_new_instance() -> None:
    settings = parse("local[4]")
    assert settings.replace(max_parallelism="8").max_parallelism == 8
    with pytest.raises(ConnectionSettingsError, match="total_cores: 8 is more than master 'local\\[4\\]' runs"):
        settings.replace(total_cores=8)


# -- storage_conn_id --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("aws_default", "aws_default"), (" my-s3.conn ", "my-s3.conn"), ("team/s3:prod", "team/s3:prod")],
)
def test_storage_conn_id_is_a_connection_id(raw: str, expected: str) -> None:
    settings = parse(storage_root="s3://lake/fg", storage_conn_id=raw)
    assert settings.storage_conn_id == expected
    assert (settings.storage_scheme, settings.storage_is_local) == ("s3", False)


def test_storage_conn_id_defaults_to_none_and_may_come_from_the_config() -> None:
    assert parse().storage_conn_id is None
    assert parse(defaults={"storage_conn_id": "aws_lake"}).storage_conn_id == "aws_lake"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("my conn", "storage_conn_id: 'my conn' is not an Airflow connection id; allowed: up to 250 letters"),
        ("x" * 251, "is not an Airflow connection id"),
        (42, "storage_conn_id: 42 is not a non-empty string"),
    ],
)
def test_bad_storage_conn_id_names_value_and_allowed(raw: Any, expected: str) -> None:
    assert expected in problems(storage_conn_id=raw)


@pytest.mark.parametrize(
    ("root", "scheme"), [("/data", "file"), ("file:///data", "file"), ("S3A://b/p", "s3a"), ("gs://b", "gs")]
)
def test_storage_scheme(root: str, scheme: str) -> None:
    assert parse(storage_root=root).storage_scheme == scheme


@pytest.mark.security
def test_a_switch_under_a_secret_name_is_redacted_but_not_masked_in_every_log() -> None:
    # Airflow's names match broadly: "authorization" makes this key secret; masking "false" would blank the
    # word in every task log. A number stays masked: it may be a PIN.
    settings = parse(
        spark_conf={
            "spark.hadoop.fs.s3a.authorization.enabled": "false",
            "spark.executorEnv.API_PIN_PASSWD": "493021",
            "spark.executorEnv.API_KEY": "APIKEY-555qrs",
        }
    )
    assert settings.redacted()["spark_conf"]["spark.hadoop.fs.s3a.authorization.enabled"] == "***"
    assert sorted(settings.secret_values()) == ["493021", "APIKEY-555qrs"]
