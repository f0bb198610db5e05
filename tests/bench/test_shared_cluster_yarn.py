"""The shared-cluster benchmark's cluster choice and its YARN parts that need no cluster: YARN's application
reports read into reserved core-seconds, the sizes ``hadoop start`` gets, the connection and spark-submit on
YARN, each run's time from Airflow's database and the answer check."""

from __future__ import annotations

import ast
import json
import shlex
import sqlite3
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench.lib.pipeline import STAGES
from bench.lib.yarn import apps_of, printed_connection, yarn_usage
from bench.shared_cluster.__main__ import cluster_reserved, parse_args, results_name, summarize
from bench.shared_cluster.clusters import Sizes, YarnTarget, queue_admission
from bench.shared_cluster.policies import Shape, dynamic_dag_text, provider_connection
from bench.shared_cluster.runs import AnswerCheck, folder_answers, run_seconds, seconds_between


def _app(app_id: str, started_s: float, **fields: Any) -> dict[str, Any]:
    """An application as ``/ws/v1/cluster/apps`` lists it (the fields Hadoop's REST API documents)."""
    return {
        "id": app_id,
        "user": "bench",
        "name": f"tpch_pipeline.{app_id}",
        "queue": "default",
        "state": "FINISHED",
        "finalStatus": "SUCCEEDED",
        "startedTime": int(started_s * 1000),
        "finishedTime": int(started_s * 1000) + 30_000,
        "allocatedVCores": -1,
        "memorySeconds": 0,
        "vcoreSeconds": 0,
        **fields,
    }


def test_reserved_core_seconds_are_yarn_s_own_account_of_the_window_s_applications() -> None:
    answer = {
        "apps": {
            "app": [
                _app("application_1_0002", 120, vcoreSeconds=90, memorySeconds=135_000),
                _app("application_1_0001", 100, vcoreSeconds=60, memorySeconds=92_160),
                _app(
                    "application_1_0003", 140, state="RUNNING", finalStatus="UNDEFINED", finishedTime=0, vcoreSeconds=5
                ),
                _app("application_1_0004", 150, state="FINISHED", finalStatus="FAILED", vcoreSeconds=7),
                _app("application_0_0009", 40, vcoreSeconds=1000),  # an earlier policy's
            ]
        }
    }
    usage = yarn_usage(apps_of(answer), started=99.0, ended=200.0)
    assert usage["reserved_core_s"] == 90 + 60 + 5 + 7  # by hand: the window's vcoreSeconds
    assert usage["reserved_mb_s"] == 135_000 + 92_160
    assert usage["applications"] == 4
    assert usage["unfinished"] == ["application_1_0003"]
    assert usage["not_succeeded"] == ["application_1_0004"]
    assert [a["id"] for a in usage["apps"]][:2] == ["application_1_0001", "application_1_0002"]  # by start
    assert usage["apps"][0] | {"start": 100.0, "end": 130.0, "vcore_s": 60} == usage["apps"][0]
    assert usage["apps"][2]["end"] is None  # YARN's finishedTime 0: still running
    assert apps_of({"apps": None}) == [] and yarn_usage([], 0, 1)["reserved_core_s"] == 0.0


def test_on_yarn_the_reserved_figure_is_yarn_s_and_the_event_logs_figure_is_kept_beside_it() -> None:
    run = {"reserved_core_s": 35.0}
    usage = yarn_usage([_app("application_1_0001", 100, vcoreSeconds=48, memorySeconds=70_000)], 99, 200)
    on_yarn = cluster_reserved(run, usage)
    assert (on_yarn["reserved_core_s"], on_yarn["event_log_reserved_core_s"]) == (48.0, 35.0)
    assert on_yarn["reserved_mb_s"] == 70_000.0 and on_yarn["reserved_from"].startswith("YARN")
    assert cluster_reserved(run, None) == {"reserved_from": "event logs (executor lifetimes x cores)"}


def test_the_cluster_is_chosen_on_the_command_line_standalone_by_default(capsys: pytest.CaptureFixture[str]) -> None:
    default = parse_args([])
    assert (default.cluster, default.policies, results_name(default.cluster)) == (
        "standalone",
        ["dynamic", "provider"],
        "shared_cluster",
    )
    yarn = parse_args(["--cluster", "yarn", "--policies", "provider,provider+queue"])
    assert (yarn.cluster, yarn.policies, results_name(yarn.cluster)) == (
        "yarn",
        ["provider", "provider+queue"],
        "shared_cluster-yarn",
    )
    for bad in (["--cluster", "kubernetes"], ["--policies", "provider,hand"]):
        with pytest.raises(SystemExit):
            parse_args(bad)
    assert "kubernetes" in capsys.readouterr().err


def test_yarn_s_default_queue_gets_the_standalone_workers_cores_and_memory() -> None:
    sizes = Sizes(2, 4, "6g")
    assert (sizes.total_cores, sizes.total_memory, Sizes(1, 2, "512m").total_memory) == (8, "12288m", "512m")
    assert sizes.describe() == {"workers": 2, "cores_per_worker": 4, "memory": "6g"}  # what bench/simulate reads
    # Two NodeManagers of twice a worker, half of it in the 'small' queue: 'default' holds 8 cores, 12 GiB.
    assert sizes.yarn_start_args() == [
        *("--nodemanagers", "2", "--vcores", "8", "--memory-mb", "12288", "--small-queue-percent", "50")
    ]
    with pytest.raises(ValueError, match="in g or m"):
        _ = Sizes(1, 1, "6t").memory_mb_per_worker


def _printed(capsys: pytest.CaptureFixture[str], extra: dict[str, Any]) -> str:
    """The connection line as the provider's ``hadoop start`` prints it (its own printer)."""
    from airflow_provider_finegrained.cli.cluster import print_connection

    print("HADOOP_CONF_DIR: /tmp/h/conf")
    print_connection("yarn", extra, "hadoop stop --dir /tmp/h")
    return capsys.readouterr().out


def _yarn(capsys: pytest.CaptureFixture[str]) -> YarnTarget:
    printed = {
        "hadoop_conf_dir": "/tmp/h/conf",
        "yarn_resourcemanager_url": "http://127.0.0.1:8088",
        "total_cores": 16,
        "total_memory": "24576m",
        "executor_cores": 1,
        "executor_memory": "1g",
        "storage_root": "hdfs://127.0.0.1:9000/finegrained",
        "spark_conf": {"spark.yarn.jars": "local:/opt/spark/jars/*", "spark.yarn.am.memory": "512m"},
    }
    host, extra = printed_connection(_printed(capsys, printed))
    assert (host, extra) == ("yarn", printed)
    return YarnTarget(Path("/tmp/h"), Sizes(2, 4, "6g"), extra, "hdfs://127.0.0.1:9000")


def test_the_provider_on_yarn_uses_the_printed_connection_with_the_local_root_and_the_queue_s_size(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    connection = json.loads(provider_connection(_yarn(capsys), Shape(), tmp_path / "ev", admission="cluster_queue"))
    extra = connection["extra"]
    assert connection["host"] == "yarn"
    assert "storage_root" not in extra  # the local default root, as on standalone
    assert (extra["hadoop_conf_dir"], extra["yarn_resourcemanager_url"]) == ("/tmp/h/conf", "http://127.0.0.1:8088")
    assert (extra["total_cores"], extra["total_memory"], extra["admission"]) == (8, "12288m", "cluster_queue")
    conf = extra["spark_conf"]
    assert conf["spark.yarn.jars"] == "local:/opt/spark/jars/*" and conf["spark.eventLog.enabled"] == "true"
    with pytest.raises(Exception, match="no connection line"):
        printed_connection("HDFS: hdfs://127.0.0.1:9000\n")


def test_the_dynamic_policy_submits_to_yarn_with_the_hadoop_conf_and_local_paths(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    text = dynamic_dag_text(_yarn(capsys).submit(), Shape(), tmp_path / "ev", tmp_path / "out")
    commands = [
        shlex.split(node.value.value)
        for node in ast.walk(ast.parse(text))
        if isinstance(node, ast.keyword) and node.arg == "bash_command" and isinstance(node.value, ast.Constant)
    ]
    assert len(commands) == len(STAGES)
    command = commands[0]
    assert command[:2] == ["env", "HADOOP_CONF_DIR=/tmp/h/conf"]
    assert command[command.index("--master") + 1] == "yarn"
    assert "spark.hadoop.fs.defaultFS=file:///" in command  # the tables and outputs are local paths
    assert "spark.yarn.stagingDir=hdfs://127.0.0.1:9000/user/" in " ".join(command)
    assert "spark.yarn.jars=local:/opt/spark/jars/*" in command
    assert "spark.dynamicAllocation.enabled=true" in command


def test_each_run_s_time_is_airflow_s_record(tmp_path: Path) -> None:
    db = tmp_path / "airflow.db"
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE dag_run (dag_id TEXT, run_id TEXT, start_date TIMESTAMP, end_date TIMESTAMP)")
        conn.executemany(
            "INSERT INTO dag_run VALUES (?, ?, ?, ?)",
            [
                ("d", "a", "2026-11-28 08:30:01.500000", "2026-11-28 08:31:03.000000"),
                ("d", "b", "2026-11-28 08:30:02.000000+00:00", None),
            ],
        )
    assert run_seconds(db, "d", ["a", "b", "c"]) == {"a": 61.5, "b": None, "c": None}
    assert seconds_between("2026-11-28T08:00:00+00:00", "2026-11-28T09:00:00+00:00") == 3600.0


def _answer(out: Path, q1_sum: float) -> Path:
    rows = {
        "q1_pricing_summary": {"l_returnflag": ["A"], "l_linestatus": ["F"], "sum_qty": [q1_sum]},
        "q3_shipping_priority": {"l_orderkey": [1], "o_orderdate": ["1995-03-01"], "o_shippriority": [0]},
        "q5_local_supplier_volume": {"n_name": ["CHINA"], "revenue": [10.0]},
    }
    for stage, columns in rows.items():
        (out / stage).mkdir(parents=True)
        pq.write_table(pa.table(columns), out / stage / "part-0.parquet")
    return out


def test_answers_are_compared_with_the_first_run_of_the_same_scale(tmp_path: Path) -> None:
    check = AnswerCheck()
    first, same, other = (_answer(tmp_path / n, s) for n, s in (("a", 5.0), ("b", 5.0), ("c", 6.0)))
    assert check.check("provider r0", 0, lambda: folder_answers(first)) == {}
    assert check.baseline_of(0) == "provider r0"
    assert check.check("dynamic r0", 0, lambda: folder_answers(same)) == {}
    assert check.check("dynamic r1", 0, lambda: folder_answers(other)) == {"q1": ["row 0 sum_qty: 6.0 != 5.0"]}
    assert check.check("dynamic r2", 1, lambda: folder_answers(tmp_path / "none")) == {
        q: ["answer missing"] for q in ("q1", "q3", "q5")
    }
    assert check.baseline_of(1) is None  # a missing answer is never the baseline

    def broken() -> dict[str, Any]:
        raise FileNotFoundError("gone")

    assert check.check("provider r1", 0, broken)["q5"] == ["unreadable: gone"]


def test_the_two_admissions_are_compared_on_medians() -> None:
    run = {"makespan_s": 100.0, "reserved_core_s": 200.0, "used_core_s": 1.0, "queue_s": 0.0}
    run |= {"applications": 1, "tasks": 1}
    summary = summarize({"provider": [run], "provider+queue": [run | {"reserved_core_s": 300.0}]})
    assert summary["queue_vs_fit_now"] == {"reserved_ratio": pytest.approx(1.5), "makespan_ratio": 1.0}
    assert "vs_dynamic" not in summary


def test_yarn_s_limit_on_application_masters_is_read_from_the_scheduler() -> None:
    # The loopback YARN's answer (trimmed) with the default queue at 50% of 2 x 8 vcores, 2 x 12 GiB: its
    # ApplicationMasters may take 10% of the queue, 1280 MiB and 1 vcore: one client-mode application at once.
    limit = {"memory": 1280, "vCores": 1}
    queues = [
        {"queueName": "default", "absoluteCapacity": 50.0, "absoluteMaxCapacity": 50.0, "AMResourceLimit": limit}
        | {"configuredMaxAMResourceLimit": 0.1},
        {"queueName": "small", "AMResourceLimit": {"memory": 6144, "vCores": 8}},
    ]
    answer = {"scheduler": {"schedulerInfo": {"type": "capacityScheduler", "queues": {"queue": queues}}}}
    default = queue_admission(answer)
    assert (default["am_limit_mb"], default["am_limit_vcores"], default["max_am_resource_percent"]) == (1280, 1, 0.1)
    assert (default["am_slots"], default["capacity_percent"]) == (1, 50.0)
    assert queue_admission(answer, "small")["am_slots"] == 6  # 6 GiB of 1 GiB containers; 8 vcores
    queues[0]["AMResourceLimit"] = {"memory": 512, "vCores": 0}
    assert queue_admission(answer)["am_slots"] == 1  # YARN activates one application past the limit
