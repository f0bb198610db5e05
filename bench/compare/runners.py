"""Running one variant once at one scale and collecting what it did (times, tasks, CPU, memory, answers)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.compare.answers import Rows, read_rows
from bench.compare.measure import ProcessRun, SparkWork, event_log_conf, read_event_logs, run_measured
from bench.compare.pipeline import ANSWERS, DAG_ID, STAGES, fused_producers
from bench.compare.variants import Variant

REPO = Path(__file__).resolve().parents[2]
STAGE_APP = Path(__file__).resolve().parent / "stage_app.py"
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
    """One variant run: the summary numbers (JSON-ready) and the answers read from its outputs."""

    metrics: dict[str, Any]
    answers: dict[str, Rows]


def _seconds(started: str | None, ended: str | None) -> float | None:
    if not started or not ended:
        return None
    return (datetime.fromisoformat(ended) - datetime.fromisoformat(started)).total_seconds()


def _spark_metrics(work: SparkWork) -> dict[str, Any]:
    return {"applications": work.applications, "tasks": work.tasks, "task_cpu_s": work.task_cpu_s}


# ---------------------------------------------------------------- spark-submit variants (a, b, oracle)


def _submit(setup: Setup, variant: Variant, stages: list[str], run_dir: Path, logs: Path, name: str) -> ProcessRun:
    from airflow_provider_finegrained.spark.submit import (
        SubmitRequest,
        build_spark_submit_command,
        build_spark_submit_env,
    )

    timings = run_dir / f"timings-{name}.json"
    spec = {
        "tables": str(setup.tables),
        "out": str(run_dir / "out"),
        "stages": stages,
        "partitions": {s: setup.oracle_partitions[s] for s in stages} if variant.oracle else None,
        "fuse": not variant.blocking,
        "timings": str(timings),
    }
    conf = {**variant.conf, **event_log_conf(run_dir / "eventlogs")}
    request = SubmitRequest(
        application=str(STAGE_APP),
        master=setup.master,
        name=f"bench-{variant.key}-{name}",
        conf=conf,
        application_args=[json.dumps(spec)],
        driver_memory=DRIVER_MEMORY,
    )
    env = build_spark_submit_env(request, {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    result = run_measured(build_spark_submit_command(request), env, log=logs / f"{name}.log")
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
    fused = fused_producers(list(STAGES)) if not variant.per_stage_apps else set()
    for stage, values in stages.items():
        group_work = work.per_group.get(stage, {})
        values.update(tasks=int(group_work.get("tasks", 0)), task_cpu_s=group_work.get("task_cpu_s", 0.0))
        values["fused_into_consumer"] = stage in fused
    answers = {q: read_rows(run_dir / "out" / stage) for q, (stage, _) in ANSWERS.items()}
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
    return RunResult(metrics, answers)


# ---------------------------------------------------------------- provider variants (c, d, e)

BLOCKING_DAG_ID = f"{DAG_ID}_blocking"


def blocking_dag_text(text: str) -> str:
    """The example DAG with its pipelined exchanges made blocking (each stage its own region) and its own id."""
    if text.count('mode="pipelined"') != 2 or text.count(f'dag_id="{DAG_ID}"') != 1:
        raise ValueError("the example DAG changed: expected two pipelined inputs and one dag_id to rewrite")
    return text.replace('mode="pipelined"', 'mode="blocking"').replace(
        f'dag_id="{DAG_ID}"', f'dag_id="{BLOCKING_DAG_ID}"'
    )


def airflow_env(home: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
    )
    env.update(extra or {})
    return env


def _airflow() -> str:
    return str(Path(sys.executable).parent / "airflow")


def prepare_airflow(home: Path) -> None:
    """A fresh AIRFLOW_HOME: migrated SQLite, the example DAG and its blocking copy, no connection defined."""
    dags = home / "dags"
    dags.mkdir(parents=True, exist_ok=True)
    examples = REPO / "dags_examples"
    for name in ("tpch_pipeline.py", "tpch_queries.py"):
        shutil.copy(examples / name, dags / name)
    (dags / f"{BLOCKING_DAG_ID}.py").write_text(blocking_dag_text((examples / "tpch_pipeline.py").read_text()))
    subprocess.run([_airflow(), "db", "migrate"], check=True, capture_output=True, env=airflow_env(home), timeout=900)


def _json_command(command: list[str], env: dict[str, str]) -> Any:
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, check=False)
    if done.returncode != 0:
        raise VariantFailed(f"{' '.join(command[:4])} failed: {done.stderr.strip()[-2000:]}")
    return first_json(done.stdout)


def first_json(text: str) -> Any:
    """The JSON document that fills the output from some line on (CLI log lines may precede it)."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith(("{", "[")):
            try:
                return json.loads("".join(lines[i:]))
            except ValueError:
                continue  # a log line such as "[2026-...] INFO ..."
    raise ValueError(f"no JSON in the output: {text[-500:]!r}")


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
    conf = json.dumps({"data_dir": str(setup.tables)})
    extra = (lambda: warm_pool_processes(setup.airflow_home)) if variant.warm else None
    proc = run_measured([_airflow(), "dags", "test", dag_id, "-c", conf], env, log=logs / "dags-test.log", extra=extra)
    report = _json_command([sys.executable, "-m", "airflow_provider_finegrained", "report", dag_id, "--json"], env)
    run_id = report["run_id"]
    states = _json_command([_airflow(), "tasks", "states-for-dag-run", dag_id, run_id, "-o", "json"], env)
    failed = {s["task_id"]: s["state"] for s in states if s["state"] != "success"}
    task_s = {s["task_id"]: _seconds(s.get("start_date"), s.get("end_date")) for s in states}
    pipeline_s = _seconds(min(s["start_date"] for s in states), max(s["end_date"] for s in states))
    if proc.returncode != 0 or failed or set(report["stages"]) != set(STAGES):
        raise VariantFailed(
            f"variant {variant.key}: dags test exited {proc.returncode}, tasks not successful {failed}; "
            f"log: {logs / 'dags-test.log'}"
        )
    work = read_event_logs(events).minus(before)
    stages: dict[str, dict[str, Any]] = {}
    regions: dict[str, float] = {}
    for stage, result in report["stages"].items():
        trace = result.get("trace", {})
        timings = trace.get("timings", {})
        regions[trace.get("region", stage)] = timings.get("submit_s", 0.0)
        group_work = work.per_group.get(stage, {})
        trace_tasks = _trace_tasks(trace.get("spark_tasks"))
        # Spark Connect (the warm pool) tags jobs instead of grouping them: per stage, the trace's count then.
        per_stage = group_work or trace_tasks or {}
        stages[stage] = {
            "work_s": _seconds(trace.get("started_at"), trace.get("ended_at")),
            "task_s": timings.get("submit_s"),
            "airflow_task_s": task_s.get(stage),
            "tasks": int(per_stage.get("tasks", 0)),
            "task_cpu_s": per_stage.get("task_cpu_s", 0.0),
            "tasks_from": "event log" if group_work else "trace",
            "parallelism": trace.get("parallelism"),
            "region": trace.get("region"),
            "trace_tasks": trace_tasks,
        }
    answers = {q: read_rows(report["stages"][stage]["output"]["path"]) for q, (stage, _) in ANSWERS.items()}
    storage = setup.airflow_home / "finegrained" / "storage" / dag_id / run_id
    shutil.rmtree(storage, ignore_errors=True)  # outputs are read; keep the disk from filling over repeats
    metrics = {
        "wall_s": proc.wall_s,
        # The DAG's tasks, first start to last end: the pipeline as Airflow ran it, without the CLI's own start.
        "pipeline_s": pipeline_s,
        "peak_rss_bytes": proc.peak_rss_bytes,
        "process_cpu_s": proc.cpu_s,
        **_spark_metrics(work),
        # The pool's application started before the run: count the applications the stages ran in.
        "applications": len({r.get("trace", {}).get("application_id") for r in report["stages"].values()}),
        "apps_wall_s": sum(regions.values()),  # the regions' spark-submits; the rest is Airflow's own time
        "stages": stages,
        "run_id": run_id,
    }
    return RunResult(metrics, answers)


def _provider_env(airflow_home: Path, variant: Variant, events: Path) -> dict[str, str]:
    spark_conf = json.dumps(event_log_conf(events))
    return airflow_env(airflow_home, {"AIRFLOW__FINEGRAINED__SPARK_CONF": spark_conf, **variant.env})


def _warm_events(work: Path) -> Path:
    # A warm pool keeps the event-log folder it started with and outlives the runs: one folder for all of them.
    return work / "eventlogs-warm"


def start_warm_pool(work: Path, airflow_home: Path, variant: Variant) -> float:
    """Start ``variant``'s warm pool before its runs, as a deployment keeps it ready; seconds until healthy.

    Its idle timeout outlasts the whole benchmark (the harness stops it at the end), so every run of the
    variant finds it running and none pays its start.
    """
    command = [sys.executable, "-m", "airflow_provider_finegrained", "warm", "start", "--idle-timeout", "86400"]
    started = time.perf_counter()
    env = _provider_env(airflow_home, variant, _warm_events(work))
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900, check=False)
    if done.returncode != 0:
        raise VariantFailed(f"warm pool did not start: {done.stderr.strip()[-2000:]}")
    return time.perf_counter() - started


def warm_folders(airflow_home: Path | None) -> list[Path]:
    """The folders warm pools of this AIRFLOW_HOME's storage may live in (the provider's ``pool_folders``)."""
    from airflow_provider_finegrained.warm.folders import pool_folders

    root = (airflow_home or Path("/nonexistent")) / "finegrained" / "storage" / "_warm"
    return [Path(folder) for folder in pool_folders(root)]


def warm_pool_processes(airflow_home: Path | None) -> list[Any]:
    """The processes of the warm pools under this AIRFLOW_HOME's storage (outside the run's process tree)."""
    from airflow_provider_finegrained.warm.state import pool_processes

    return [p for folder in warm_folders(airflow_home) for p in pool_processes(str(folder))]


def stop_warm_pools(airflow_home: Path | None) -> None:
    """Stop every warm pool the benchmark's Airflow started (they outlive runs by design)."""
    from airflow_provider_finegrained.warm.control import stop

    for folder in warm_folders(airflow_home):
        stop(str(folder))


def _trace_tasks(spark_tasks: dict[str, Any] | None) -> dict[str, float] | None:
    """The provider's own count (trace.spark_tasks), kept beside the event logs' as a cross-check."""
    if not spark_tasks:
        return None
    from airflow_provider_finegrained.runtime.spark_status import StageTaskReport

    report = StageTaskReport.from_dict(spark_tasks)
    return {"tasks": report.total_tasks, "task_cpu_s": report.cpu_time_s}


def run_variant(setup: Setup, variant: Variant, run_dir: Path) -> RunResult:
    """Run ``variant`` once into ``run_dir`` (created fresh)."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    if variant.runner == "provider":
        return run_provider(setup, variant, run_dir)
    return run_spark_submit(setup, variant, run_dir)
