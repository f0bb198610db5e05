"""Running one variant once at one scale and collecting what it did (times, tasks, CPU, memory, answers)."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.compare.variants import Variant
from bench.lib.airflow import airflow, airflow_env, migrate
from bench.lib.answers import Rows, answers_in, read_rows
from bench.lib.measure import ProcessRun, run_measured
from bench.lib.pipeline import ANSWERS, DAG_ID, EXAMPLES, STAGE_APP, STAGES, fused_producers
from bench.lib.provider import json_command, stage_report, start_warm_pool, warm_pool_processes
from bench.lib.session import spark_submit, spark_submit_env
from bench.lib.spark_metrics import SparkWork, event_log_conf, read_event_logs

DRIVER_MEMORY = "2g"  # the connection's default driver memory: the embedded default runs with it too


class VariantFailed(RuntimeError):
    """A variant's run did not complete; the message says where to look."""


@dataclass
class Setup:
    """Where one harness invocation works: the tables at a scale, a scratch folder, the local master."""

    tables: Path
    work: Path
    master: str
    airflow_home: Path | None = None
    oracle_partitions: dict[str, int] = field(default_factory=dict)


@dataclass
class RunResult:
    """One variant run: the summary numbers (JSON-ready), the answers read from its outputs and, for the
    provider's variants, each stage's trace as the run published it (``finegrained report``)."""

    metrics: dict[str, Any]
    answers: dict[str, Rows]
    traces: dict[str, dict[str, Any]] = field(default_factory=dict)


def _seconds(started: str | None, ended: str | None) -> float | None:
    if not started or not ended:
        return None
    return (datetime.fromisoformat(ended) - datetime.fromisoformat(started)).total_seconds()


def _spark_metrics(work: SparkWork) -> dict[str, Any]:
    return {"applications": work.applications, "tasks": work.tasks, "task_cpu_s": work.task_cpu_s}


def run_variant(setup: Setup, variant: Variant, run_dir: Path) -> RunResult:
    """Run ``variant`` once into ``run_dir`` (created fresh)."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    if variant.runner == "provider":
        return run_provider(setup, variant, run_dir)
    return run_spark_submit(setup, variant, run_dir)


# ---------------------------------------------------------------- spark-submit variants (a, b, oracle)


def _submit(setup: Setup, variant: Variant, stages: list[str], run_dir: Path, logs: Path, name: str) -> ProcessRun:
    timings = run_dir / f"timings-{name}.json"
    spec = {
        "tables": str(setup.tables),
        "out": str(run_dir / "out"),
        "stages": stages,
        "partitions": {s: setup.oracle_partitions[s] for s in stages} if variant.oracle else None,
        "fuse": not variant.blocking,
        "timings": str(timings),
    }
    command = spark_submit(
        STAGE_APP,
        [json.dumps(spec)],
        master=setup.master,
        conf={**variant.conf, **event_log_conf(run_dir / "eventlogs")},
        name=f"bench-{variant.key}-{name}",
        driver_memory=DRIVER_MEMORY,
    )
    result = run_measured(command, spark_submit_env(), log=logs / f"{name}.log")
    if result.returncode != 0 or not timings.exists():
        raise VariantFailed(
            f"variant {variant.key}: spark-submit of {name} exited {result.returncode}; log: {logs / f'{name}.log'}"
        )
    return result


def run_spark_submit(setup: Setup, variant: Variant, run_dir: Path) -> RunResult:
    """Variants a, b (one spark-submit per stage, as Airflow tasks run them) and the oracle (one for all)."""
    logs = run_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    groups = [[s] for s in STAGES] if variant.per_stage_apps else [list(STAGES)]
    stages: dict[str, dict[str, Any]] = {}
    wall = cpu = 0.0
    peak = 0
    for group in groups:
        name = group[0] if len(group) == 1 else "pipeline"
        proc = _submit(setup, variant, group, run_dir, logs, name)
        wall += proc.wall_s
        cpu += proc.cpu_s
        peak = max(peak, proc.peak_rss_bytes)
        timing = json.loads((run_dir / f"timings-{name}.json").read_text())
        for stage, t in timing["stages"].items():
            stages[stage] = {"work_s": t["work_s"], "task_s": proc.wall_s if len(group) == 1 else None}
    work = read_event_logs(run_dir / "eventlogs")
    fused = fused_producers(STAGES) if not variant.per_stage_apps else set()
    for stage, values in stages.items():
        group_work = work.per_group.get(stage, {})
        values.update(tasks=int(group_work.get("tasks", 0)), task_cpu_s=group_work.get("task_cpu_s", 0.0))
        values["fused_into_consumer"] = stage in fused
    metrics = {
        "wall_s": wall,
        "pipeline_s": wall,  # no Airflow around it: the applications are the pipeline
        "apps_wall_s": wall,
        "peak_rss_bytes": peak,
        "process_cpu_s": cpu,
        **_spark_metrics(work),
        "stages": stages,
    }
    if variant.oracle:
        metrics["oracle_partitions"] = dict(setup.oracle_partitions)
    return RunResult(metrics, answers_in(run_dir / "out"))


# ---------------------------------------------------------------- provider variants (c, d, e)

BLOCKING_DAG_ID = f"{DAG_ID}_blocking"


def blocking_dag_text(text: str) -> str:
    """The example DAG with its pipelined exchanges made blocking (each stage its own region) and its own id."""
    if text.count('mode="pipelined"') != 2 or text.count(f'dag_id="{DAG_ID}"') != 1:
        raise ValueError("the example DAG changed: expected two pipelined inputs and one dag_id to rewrite")
    return text.replace('mode="pipelined"', 'mode="blocking"').replace(
        f'dag_id="{DAG_ID}"', f'dag_id="{BLOCKING_DAG_ID}"'
    )


def prepare_airflow(home: Path) -> None:
    """A fresh AIRFLOW_HOME: migrated SQLite, the example DAG and its blocking copy, no connection defined."""
    dags = home / "dags"
    dags.mkdir(parents=True, exist_ok=True)
    for name in ("tpch_pipeline.py", "tpch_queries.py"):
        shutil.copy(EXAMPLES / name, dags / name)
    (dags / f"{BLOCKING_DAG_ID}.py").write_text(blocking_dag_text((EXAMPLES / "tpch_pipeline.py").read_text()))
    migrate(airflow_env(home))


def run_provider(setup: Setup, variant: Variant, run_dir: Path) -> RunResult:
    """Variants c, d, e: the example DAG under ``airflow dags test`` with the embedded default connection."""
    assert setup.airflow_home is not None
    dag_id = BLOCKING_DAG_ID if variant.blocking else DAG_ID
    logs = run_dir / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    # The warm pool's event log grows over all runs: each run's share is the difference before and after it.
    events = _warm_events(setup.work) if variant.warm else run_dir / "eventlogs"
    before = read_event_logs(events) if variant.warm else SparkWork()
    env = _provider_env(setup.airflow_home, variant, events)
    extra = (lambda: warm_pool_processes(setup.airflow_home)) if variant.warm else None
    command = [airflow(), "dags", "test", dag_id, "-c", json.dumps({"data_dir": str(setup.tables)})]
    proc = run_measured(command, env, log=logs / "dags-test.log", extra=extra)
    report = stage_report(dag_id, env)
    run_id = report["run_id"]
    states = json_command([airflow(), "tasks", "states-for-dag-run", dag_id, run_id, "-o", "json"], env)
    failed = {s["task_id"]: s["state"] for s in states if s["state"] != "success"}
    if proc.returncode != 0 or failed or set(report["stages"]) != set(STAGES):
        raise VariantFailed(
            f"variant {variant.key}: dags test exited {proc.returncode}, tasks not successful {failed}; "
            f"log: {logs / 'dags-test.log'}"
        )
    work = read_event_logs(events).minus(before)
    traces = {stage: result.get("trace", {}) for stage, result in report["stages"].items()}
    task_s = {s["task_id"]: _seconds(s.get("start_date"), s.get("end_date")) for s in states}
    regions = {t.get("region", stage): t.get("timings", {}).get("submit_s", 0.0) for stage, t in traces.items()}
    answers = {q: read_rows(report["stages"][stage]["output"]["path"]) for q, (stage, _) in ANSWERS.items()}
    shutil.rmtree(setup.airflow_home / "finegrained" / "storage" / dag_id / run_id, ignore_errors=True)  # read
    metrics = {
        "wall_s": proc.wall_s,
        # The DAG's tasks, first start to last end: the pipeline as Airflow ran it, without the CLI's own start.
        "pipeline_s": _seconds(min(s["start_date"] for s in states), max(s["end_date"] for s in states)),
        "peak_rss_bytes": proc.peak_rss_bytes,
        "process_cpu_s": proc.cpu_s,
        **_spark_metrics(work),
        # The pool's application started before the run: count the applications the stages ran in.
        "applications": len({t.get("application_id") for t in traces.values()}),
        "apps_wall_s": sum(regions.values()),  # the regions' spark-submits; the rest is Airflow's own time
        "stages": {stage: _stage_metrics(stage, trace, work, task_s.get(stage)) for stage, trace in traces.items()},
        "run_id": run_id,
    }
    return RunResult(metrics, answers, traces)


def _stage_metrics(stage: str, trace: dict[str, Any], work: SparkWork, airflow_task_s: float | None) -> dict[str, Any]:
    """One stage of a provider run: its times, and its tasks and task CPU (event logs, else the trace's count)."""
    timings = trace.get("timings", {})
    group_work = work.per_group.get(stage, {})
    trace_tasks = _trace_tasks(trace.get("spark_tasks"))
    # Spark Connect (the warm pool) tags jobs instead of grouping them: per stage, the trace's count then.
    per_stage = group_work or trace_tasks or {}
    return {
        "work_s": _seconds(trace.get("started_at"), trace.get("ended_at")),
        "task_s": timings.get("submit_s"),
        "airflow_task_s": airflow_task_s,
        "tasks": int(per_stage.get("tasks", 0)),
        "task_cpu_s": per_stage.get("task_cpu_s", 0.0),
        "tasks_from": "event log" if group_work else "trace",
        "parallelism": trace.get("parallelism"),
        "region": trace.get("region"),
        "trace_tasks": trace_tasks,
    }


def _trace_tasks(spark_tasks: dict[str, Any] | None) -> dict[str, float] | None:
    """The provider's own count, kept beside the event logs' as a cross-check: the trace's record of Spark's
    stages (``spark_tasks``, as published in XCom), the ones that ran."""
    if not spark_tasks:
        return None
    ran = [s for s in spark_tasks.get("spark_stages", []) if s.get("status") != "SKIPPED"]
    cpu = sum(float(s.get("cpu_time_s", 0.0)) for s in spark_tasks.get("spark_stages", []))
    return {"tasks": sum(int(s.get("tasks", 0)) for s in ran), "task_cpu_s": cpu}


def _provider_env(airflow_home: Path, variant: Variant, events: Path) -> dict[str, str]:
    spark_conf = json.dumps(event_log_conf(events))
    return airflow_env(airflow_home, {"AIRFLOW__FINEGRAINED__SPARK_CONF": spark_conf, **variant.env})


def _warm_events(work: Path) -> Path:
    # A warm pool keeps the event-log folder it started with and outlives the runs: one folder for all of them.
    return work / "eventlogs-warm"


def start_pool(work: Path, airflow_home: Path, variant: Variant) -> float:
    """Start ``variant``'s warm pool before its runs, as a deployment keeps it ready; seconds until healthy.

    Its idle timeout outlasts the whole benchmark (the harness stops it at the end), so every run of the
    variant finds it running and none pays its start.
    """
    try:
        return start_warm_pool(_provider_env(airflow_home, variant, _warm_events(work)))
    except RuntimeError as exc:
        raise VariantFailed(f"warm pool did not start: {exc}") from exc
