"""The shared-cluster benchmark's parts that need no cluster: event-log accounting, the baseline DAG, the window."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.lib.pipeline import REPO, STAGES
from bench.lib.provider import LocalCluster
from bench.shared_cluster.__main__ import measure, summarize
from bench.shared_cluster.clusters import Sizes, StandaloneTarget, Submit
from bench.shared_cluster.events import AppUsage, parse_events, read_apps
from bench.shared_cluster.policies import (
    DYNAMIC_DAG_ID,
    QUEUE_CONN_ID,
    QUEUE_DAG_ID,
    Shape,
    dynamic_dag_text,
    provider_connection,
    queue_dag_text,
    upstream_stages,
)


def _event(kind: str, t: float, **fields: Any) -> str:
    return json.dumps({"Event": f"SparkListener{kind}", "Timestamp": int(t * 1000), **fields})


def _task(launch: float, finish: float, executor: str | None = None) -> str:
    info: dict[str, Any] = {"Launch Time": int(launch * 1000), "Finish Time": int(finish * 1000)}
    if executor is not None:
        info["Executor ID"] = executor
    return json.dumps({"Event": "SparkListenerTaskEnd", "Task Info": info})


def _app(task_cpus: int = 1) -> list[str]:
    # Starts at 100; executor 1 (2 cores) from 103 to 113; executor 2 (1 core) from 105 to the end at 120.
    return [
        _event("ApplicationStart", 100, **{"App ID": "app-1", "App Name": "q3"}),
        json.dumps(
            {"Event": "SparkListenerEnvironmentUpdate", "Spark Properties": {"spark.task.cpus": str(task_cpus)}}
        ),
        _event("ExecutorAdded", 103, **{"Executor ID": "1", "Executor Info": {"Total Cores": 2}}),
        _event("ExecutorAdded", 105, **{"Executor ID": "2", "Executor Info": {"Total Cores": 1}}),
        _task(104, 106),
        _task(105, 109),
        _event("ExecutorRemoved", 113, **{"Executor ID": "1"}),
        _event("ApplicationEnd", 120),
    ]


@pytest.mark.parametrize(
    ("task_cpus", "reserved", "used"),
    [
        (1, 10 * 2 + 15 * 1, 2 + 4),  # by hand: lifetimes x cores; task run times x 1 cpu
        (2, 10 * 2 + 15 * 1, (2 + 4) * 2),
    ],
)
def test_core_seconds_and_queueing_from_an_event_log(task_cpus: int, reserved: float, used: float) -> None:
    app = parse_events(_app(task_cpus))
    assert (app.app_id, app.name, app.tasks) == ("app-1", "q3", 2)
    assert app.reserved_core_s == pytest.approx(reserved)
    assert app.used_core_s == pytest.approx(used)
    assert app.queued_s == pytest.approx(3.0)


def test_idle_core_seconds_split_by_where_they_fall_in_each_executor_s_life() -> None:
    # _app's executors, its tasks placed: 104-106 on executor 1 (2 cores, 103-113), 105-109 on executor 2
    # (1 core, 105-120); a third (1 core, 110-118) runs nothing. By hand: before the first task (104 - 103) x 2
    # + 0 = 2; after the last (113 - 106) x 2 + (120 - 109) = 25; never used 8; reserved 20 + 15 + 8 = 43,
    # used 6: between = 43 - 6 - 2 - 25 - 8 = 2 (executor 1's second core while its one task ran).
    lines = [line for line in _app() if "TaskEnd" not in line]
    lines[-1:-1] = [
        _task(104, 106, "1"),
        _task(105, 109, "2"),
        _event("ExecutorAdded", 110, **{"Executor ID": "3", "Executor Info": {"Total Cores": 1}}),
        _event("ExecutorRemoved", 118, **{"Executor ID": "3"}),
    ]
    app = parse_events(lines)
    assert app.reserved_core_s == pytest.approx(43.0)
    assert app.idle_core_s == pytest.approx(
        {"never_used": 8.0, "before_first_task": 2.0, "after_last_task": 25.0, "between_tasks": 2.0}
    )
    assert measure([app], started=99.0, ended=130.0)["idle_core_s"] == pytest.approx(app.idle_core_s)


def test_an_application_that_never_got_an_executor_reserved_nothing_and_has_no_queue_time() -> None:
    app = parse_events([_event("ApplicationStart", 10, **{"App ID": "a"}), "", _event("ApplicationEnd", 70)])
    assert (app.reserved_core_s, app.used_core_s, app.queued_s) == (0.0, 0.0, None)


def test_only_applications_started_inside_the_policy_s_window_count() -> None:
    inside, before = parse_events(_app()), AppUsage(app_id="old", start=50.0, end=60.0)
    result = measure([inside, before], started=99.0, ended=130.0)
    assert (result["applications"], result["makespan_s"], result["reserved_core_s"]) == (1, 31.0, 35.0)
    queued = result | {"reserved_core_s": 50.0, "makespan_s": 62.0}
    summary = summarize(
        {"dynamic": [result | {"reserved_core_s": 70.0}], "provider": [result], "provider+queue": [queued]}
    )
    assert summary["vs_dynamic"]["provider"] == {"reserved_ratio": pytest.approx(2.0), "makespan_ratio": 1.0}
    assert summary["vs_dynamic"]["provider+queue"] == {"reserved_ratio": pytest.approx(1.4), "makespan_ratio": 0.5}


def test_the_baseline_dag_runs_one_spark_submit_per_stage_with_dynamic_allocation(tmp_path: Path) -> None:
    submit = Submit("spark://127.0.0.1:7077")
    text = dynamic_dag_text(submit, Shape(max_executors=3), tmp_path / "ev", tmp_path / "out")
    compile(text, "tpch_dynamic.py", "exec")
    assert f"dag_id={DYNAMIC_DAG_ID!r}" in text
    assert text.count("BashOperator(task_id=") == len(STAGES)
    assert "spark.dynamicAllocation.maxExecutors=3" in text
    assert "spark.dynamicAllocation.shuffleTracking.enabled=true" in text
    assert "--master spark://127.0.0.1:7077" in text
    for stage in STAGES:
        for up in upstream_stages(stage):
            assert f"t[{up!r}] >> t[{stage!r}]" in text
    assert upstream_stages("q3_join") == ["customer_orders", "lineitem_projected"]


def test_the_queue_policy_runs_the_example_dag_under_its_own_id_on_a_cluster_queue_connection(tmp_path: Path) -> None:
    example = (REPO / "dags_examples" / "tpch_pipeline.py").read_text()
    text = queue_dag_text(example)
    compile(text, "tpch_pipeline_queue.py", "exec")
    declared = f"dag_id={QUEUE_DAG_ID!r}, default_args={{'finegrained_spark_conn_id': {QUEUE_CONN_ID!r}}},"
    assert declared in text
    assert text.replace(declared, 'dag_id="tpch_pipeline",') == example  # nothing else changed
    with pytest.raises(ValueError, match="update queue_dag_text"):
        queue_dag_text(example.replace('dag_id="tpch_pipeline"', 'dag_id="renamed"'))
    cluster = LocalCluster(tmp_path, "spark://127.0.0.1:7077", "http://127.0.0.1:8080")
    target = StandaloneTarget(cluster, Sizes(2, 4, "6g"))
    queue = json.loads(provider_connection(target, Shape(), tmp_path, admission="cluster_queue"))
    extra = queue["extra"]
    assert (queue["host"], extra["master_webui_url"]) == ("spark://127.0.0.1:7077", "http://127.0.0.1:8080")
    assert (extra["admission"], extra["total_cores"], extra["total_memory"]) == ("cluster_queue", 8, "12288m")
    assert extra["warm_pool"] == "off"
    assert json.loads(provider_connection(target, Shape(), tmp_path))["extra"]["admission"] == "fit_now"


def test_event_logs_are_read_from_plain_files_and_rolling_log_folders(tmp_path: Path) -> None:
    (tmp_path / "app-1").write_text("\n".join(_app()))
    rolling = tmp_path / "eventlog_v2_app-2"
    rolling.mkdir()
    lines = _app()
    (rolling / "events_1_app-2").write_text("\n".join(lines[:4]) + "\n")
    (rolling / "events_2_app-2").write_text("\n".join(lines[4:]) + "\n")
    (tmp_path / "app-3.inprogress").write_text(lines[0])
    apps = read_apps(tmp_path)
    assert [a.reserved_core_s for a in apps] == [35.0, 35.0]
    assert [a.tasks for a in apps] == [2, 2]
