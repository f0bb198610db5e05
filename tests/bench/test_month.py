"""The month benchmark's parts that need no cluster: the policies, the DAGs, the cluster's
connection as ``hadoop start`` prints it, the measuring from hand-made event logs and YARN reports."""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import json
from pathlib import Path
from typing import Any

import pendulum
import pytest

from bench.lib.pipeline import EXAMPLES, STAGES
from bench.month.cluster import Tenant, tenant_command, yarn_target
from bench.month.dags import DAG_IDS, PROVIDER_CONN_ID, provider_dag_text, submit_dag_text
from bench.month.measure import answers_at, spark_figures, spill_and_failures, yarn_figures
from bench.month.policies import (
    POLICY_NAMES,
    TENANT_NAME,
    DynamicAllocation,
    HandSized,
    Policies,
    ProviderHistory,
    day_order,
    select,
)
from bench.shared_cluster.events import AppUsage
from bench.shared_cluster.policies import Shape

# ---------------------------------------------------------------- the policies


def test_hand_sized_fixes_executors_and_partitions_without_dynamic_allocation(tmp_path: Path) -> None:
    conf = HandSized(executors=3, shuffle_partitions=12).spark_conf(tmp_path / "ev")
    assert conf["spark.dynamicAllocation.enabled"] == "false"
    assert conf["spark.executor.instances"] == "3" and conf["spark.cores.max"] == "3"
    assert conf["spark.sql.shuffle.partitions"] == "12" and conf["spark.sql.adaptive.enabled"] == "false"
    assert conf["spark.eventLog.dir"] == (tmp_path / "ev").resolve().as_uri()


def test_dynamic_allocation_is_spark_defaults_with_dynamic_allocation_and_aqe(tmp_path: Path) -> None:
    conf = DynamicAllocation(Shape(max_executors=5)).spark_conf(tmp_path / "ev")
    assert conf["spark.dynamicAllocation.enabled"] == "true"
    assert conf["spark.dynamicAllocation.maxExecutors"] == "5"
    assert conf["spark.sql.adaptive.enabled"] == "true"
    assert "spark.sql.shuffle.partitions" not in conf  # Spark's default, 200


def test_the_provider_policy_is_a_connection_the_provider_accepts_with_history_on(tmp_path: Path) -> None:
    from airflow_provider_finegrained.settings import ConnectionSettings

    text = ProviderHistory(history_min_runs=2).connection(
        "spark://127.0.0.1:7077", {"total_cores": 8}, tmp_path / "ev", (tmp_path / "storage").as_uri()
    )
    conn = json.loads(text)
    settings = ConnectionSettings.from_connection_fields(conn["host"], conn["extra"], airflow_home=str(tmp_path))
    assert settings.learn_from_history is True and settings.history_min_runs == 2
    assert settings.warm_pool == "off"
    assert settings.spark_conf["spark.eventLog.enabled"] == "true"


def test_each_policy_takes_every_place_in_turn() -> None:
    orders = [day_order(POLICY_NAMES, day) for day in range(3)]
    assert all(sorted(o) == sorted(POLICY_NAMES) for o in orders)
    for place in range(3):
        assert {o[place] for o in orders} == set(POLICY_NAMES)


def test_policies_are_selected_by_name_in_their_order() -> None:
    assert select("provider,hand") == ("hand", "provider")
    with pytest.raises(ValueError, match="unknown policies"):
        select("hand,oracle")
    assert set(Policies().describe()) == set(POLICY_NAMES)


# ---------------------------------------------------------------- the DAGs and the cluster


def test_the_provider_dag_is_the_example_on_its_connection_reading_the_days_tables() -> None:
    text = provider_dag_text((EXAMPLES / "tpch_pipeline.py").read_text(), "file:///w/days", dt.date(2026, 3, 2))
    assert f"dag_id={DAG_IDS['provider']!r}" in text and PROVIDER_CONN_ID in text
    assert "max_active_runs=1" in text and "pendulum.datetime(2026, 3, 2, tz='UTC')" in text
    assert "path='file:///w/days' + \"/{{ ds }}/\" + name" in text
    # A dict, not a set of one (compile() alone would not tell): the DAG's default arguments evaluated.
    default_args = text.split("default_args=", 1)[1].split("},", 1)[0] + "}"
    assert eval(default_args, {"pendulum": pendulum}) == {
        "finegrained_spark_conn_id": PROVIDER_CONN_ID,
        "retries": 1,
        "retry_delay": pendulum.duration(seconds=10),
    }
    compile(text, "tpch_month_provider.py", "exec")
    with pytest.raises(ValueError, match="no longer has"):
        provider_dag_text("with DAG(dag_id='other') as dag: pass", "/w/days", dt.date(2026, 3, 2))


def test_a_spark_submit_dag_runs_each_stage_with_the_policys_conf() -> None:
    conf = {"spark.sql.shuffle.partitions": "16", "spark.yarn.jars": "local:/jars/*"}
    text = submit_dag_text(
        "tpch_month_hand", "yarn", conf, "file:///w/days", "file:///w/out", dt.date(2026, 3, 2), "1g"
    )
    compile(text, "tpch_month_hand.py", "exec")
    assert all(f"task_id={stage!r}" in text for stage in STAGES)
    assert text.count("spark.sql.shuffle.partitions=16") == len(STAGES)
    assert "file:///w/days/{{ ds }}" in text and "file:///w/out/{{ run_id }}" in text
    assert "t['lineitem_projected'] >> t['q1_pricing_summary']" in text
    assert 'default_args={"retries": 1, "retry_delay": pendulum.duration(seconds=10)}' in text


def test_the_yarn_target_is_read_from_what_hadoop_start_prints(tmp_path: Path) -> None:
    from airflow_provider_finegrained.cli.cluster import print_connection
    from airflow_provider_finegrained.cli.hadoop import connection_extra
    from airflow_provider_finegrained.spark.hadoop_cluster import HadoopCluster

    cluster = HadoopCluster(
        str(tmp_path), 1, "3.5.0", str(tmp_path / "conf"), "hdfs://127.0.0.1:9000", "http://127.0.0.1:9870",
        "http://127.0.0.1:8088", "127.0.0.1:8032", 2, 4, 6144, str(tmp_path / "log"),
    )  # fmt: skip
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print(f"ResourceManager: {cluster.resourcemanager_url} (RPC {cluster.resourcemanager_address})")
        print(f"HADOOP_CONF_DIR: {cluster.conf_dir}")
        print_connection("yarn", connection_extra(cluster), "hadoop stop --dir x")
    target = yarn_target(tmp_path, out.getvalue())
    assert (target.master, target.connection_host) == ("yarn", "yarn")
    assert target.connection_extra == connection_extra(cluster)
    assert target.env == {"HADOOP_CONF_DIR": cluster.conf_dir}
    assert target.resourcemanager_url == "http://127.0.0.1:8088"
    assert target.submit_conf["spark.yarn.jars"].startswith("local:")
    assert target.uri(tmp_path / "days") == (tmp_path / "days").resolve().as_uri()
    with pytest.raises(RuntimeError, match="no connection line"):
        yarn_target(tmp_path, "Hadoop: 3.5.0\n")


def test_the_tenant_keeps_its_executors() -> None:
    from bench.month.cluster import Target

    target = Target("yarn", Path("/c"), "yarn", "yarn", {}, {"spark.yarn.am.memory": "512m"})
    command = tenant_command(target, Tenant(cores=3, busy=0.25))
    assert command[command.index("--name") + 1] == TENANT_NAME
    assert "spark.executor.instances=3" in command and "spark.dynamicAllocation.enabled=false" in command
    assert "spark.yarn.am.memory=512m" in command and "spark.yarn.queue=small" in command
    assert json.loads(command[-1]) == {"rows": Tenant().rows, "partitions": 3, "busy": 0.25}


# ---------------------------------------------------------------- measuring


def _task_end(memory: int, disk: int, failed: bool = False) -> str:
    metrics = {"Memory Bytes Spilled": memory, "Disk Bytes Spilled": disk}
    return json.dumps({"Event": "SparkListenerTaskEnd", "Task Info": {"Failed": failed}, "Task Metrics": metrics})


def test_spill_and_failed_tasks_from_an_event_log() -> None:
    lines = [_task_end(100, 10), _task_end(0, 0, failed=True), _task_end(5, 1), '{"Event": "SparkListenerJobEnd"}']
    assert spill_and_failures([*lines, '{"Event": "Spark']) == (105, 11, 1)


def test_spark_figures_count_the_applications_that_started_in_the_window() -> None:
    from bench.month.measure import AppFigures

    def app(start: float, used: float, spill: int) -> AppFigures:
        usage = AppUsage(start=start, end=start + 10, used_core_s=used, tasks=2)
        usage.executors["1"] = (start + 1, start + 9, 2)
        return AppFigures(usage, spill, spill, 0)

    figures = spark_figures([app(100, 5, 7), app(105, 3, 0), app(300, 50, 1)], 99, 200)
    assert figures["applications"] == 2 and figures["tasks"] == 4
    assert figures["executor_core_s"] == 2 * 8 * 2 and figures["used_core_s"] == 8
    assert figures["disk_spilled_bytes"] == 7


def test_reserved_core_seconds_from_yarns_application_reports() -> None:
    apps: list[dict[str, Any]] = [
        {"name": "tpch_month_hand.q1", "vcoreSeconds": 40, "memorySeconds": 1000, "finalStatus": "SUCCEEDED"},
        {"name": "tpch_month_hand.q3", "vcoreSeconds": 2, "memorySeconds": 50, "finalStatus": "FAILED"},
    ]
    assert yarn_figures(apps) == {
        "yarn_applications": 2,
        "reserved_core_s": 42.0,
        "reserved_mb_s": 1050.0,
        "failed_applications": 1,
    }


def test_answers_are_read_from_file_uris_and_paths(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    q1 = tmp_path / "q1"
    q1.mkdir()
    pq.write_table(pa.table({"l_returnflag": ["A"], "n": [1]}), q1 / "part-0.parquet")
    pq.write_table(pa.table({"n_name": ["CHINA"]}), tmp_path / "q5.parquet")
    got = answers_at({"q1_pricing_summary": q1.as_uri(), "q5_local_supplier_volume": str(tmp_path / "q5.parquet")})
    assert got == {"q1": [{"l_returnflag": "A", "n": 1}], "q5": [{"n_name": "CHINA"}]}
