"""One session of the month: Airflow and the cluster up, then one DAG run per (day, policy), each measured.

A day's tables land in ``<work>/days/<logical date>`` (a link to the scale's tables) before its runs; each
policy's DAG run is triggered for that logical date and waited for; its figures and answers become one
result line.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from bench.lib.airflow import Standalone, free_port, standalone_env
from bench.lib.answers import Rows
from bench.lib.pipeline import ANSWERS, EXAMPLES, scale_key, tables_for
from bench.lib.provider import stage_report
from bench.month.cluster import Target
from bench.month.dags import DAG_IDS, PROVIDER_CONN_ID, provider_dag_text, submit_dag_text
from bench.month.measure import answer_problems, answers_at, read_figures, spark_figures, yarn_apps, yarn_figures
from bench.month.pattern import Day
from bench.month.policies import Policies, PolicyName

RUN_TIMEOUT_S: Final = 7200
"""The spike day at SF 1.15 under a hand-sized policy on 2 shared cores: well under two hours."""


@dataclass
class Month:
    """What one session runs the month's days on."""

    target: Target
    policies: Policies
    work: Path
    """Kept across sessions: tables' day links, outputs, event logs, the provider's storage root (its history)."""
    data: Path
    home: Path
    """This session's Airflow home (a fresh metadata database each session)."""
    standalone: Standalone | None = None
    references: dict[str, dict[str, Rows]] = field(default_factory=dict)

    def events(self, policy: str) -> Path:
        return self.work / "events" / policy

    def out_root(self, policy: str) -> Path:
        return self.work / "out" / policy


def write_dags(month: Month, start: Any) -> None:
    """The three DAG files (and the example's stage functions) into this session's DAGs folder."""
    dags = month.home / "dags"
    dags.mkdir(parents=True, exist_ok=True)
    (dags / "tpch_queries.py").write_text((EXAMPLES / "tpch_queries.py").read_text())
    days = month.target.uri(month.work / "days")
    example = (EXAMPLES / "tpch_pipeline.py").read_text()
    (dags / "tpch_month_provider.py").write_text(provider_dag_text(example, days, start))
    for name in ("hand", "dynamic"):
        policy = getattr(month.policies, name)
        conf = {**month.target.submit_conf, **policy.spark_conf(month.events(name))}
        out = month.target.uri(month.out_root(name))
        text = submit_dag_text(DAG_IDS[name], month.target.master, conf, days, out, start, policy.shape.driver_memory)
        (dags / f"tpch_month_{name}.py").write_text(text)


def airflow_env(month: Month, parallelism: int = 4) -> dict[str, str]:
    """Every Airflow process's environment: the provider policy's connection, the cluster's, own ports."""
    connection = month.policies.provider.connection(
        month.target.connection_host,
        month.target.connection_extra,
        month.events("provider"),
        month.target.uri(month.work / "storage"),
    )
    return standalone_env(
        month.home,
        free_port(),
        {
            f"AIRFLOW_CONN_{PROVIDER_CONN_ID.upper()}": connection,
            **month.target.env,
            "AIRFLOW__CORE__PARALLELISM": str(parallelism),
            "AIRFLOW__CORE__MAX_ACTIVE_TASKS_PER_DAG": str(parallelism),
            "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(free_port()),
            "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(free_port()),
        },
    )


def land_day(month: Month, day: Day, scale: float) -> Path:
    """The day's tables at ``scale`` (generated once per scale) linked as ``<work>/days/<date>``."""
    tables = tables_for(scale, month.data)
    link = month.work / "days" / day.date
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(tables.resolve(), target_is_directory=True)
    return tables


def reference(month: Month, scale: float, tables: Path, compute: Callable[[Path], dict[str, Rows]]) -> dict[str, Rows]:
    key = scale_key(scale)
    if key not in month.references:
        month.references[key] = compute(tables)
    return month.references[key]


def trigger_and_wait(standalone: Standalone, dag_id: str, run_id: str, date: str) -> tuple[float, float, str | None]:
    """Trigger ``dag_id`` for logical date ``date``; wait for its end: (started, ended, state)."""
    started = time.time()
    standalone.cli("dags", "trigger", dag_id, "--run-id", run_id, "--logical-date", f"{date}T00:00:00+00:00")
    states = standalone.wait_ended(dag_id, [run_id], RUN_TIMEOUT_S)
    return started, time.time(), states[run_id]


def airflow_times(home: Path, dag_id: str, run_id: str) -> tuple[float, float] | None:
    """The run's start and end as Airflow recorded them (seconds since the epoch); None if it has not both."""
    url = f"file:{home / 'airflow.db'}?mode=ro"
    with contextlib.closing(sqlite3.connect(url, uri=True, timeout=30)) as db:
        row = db.execute(
            "SELECT start_date, end_date FROM dag_run WHERE dag_id = ? AND run_id = ?", (dag_id, run_id)
        ).fetchone()
    if not row or not row[0] or not row[1]:
        return None
    start, end = (dt.datetime.fromisoformat(str(v)) for v in row)
    return _epoch(start), _epoch(end)


def _epoch(moment: dt.datetime) -> float:
    """Seconds since the epoch; a naive time is UTC (as Airflow stores it)."""
    return (moment if moment.tzinfo else moment.replace(tzinfo=dt.UTC)).timestamp()


def output_paths(month: Month, policy: PolicyName, run_id: str) -> dict[str, str]:
    """Where the run wrote each answer stage's output: the provider's report, or the spark-submit DAG's folder."""
    if policy != "provider":
        return {stage: str(month.out_root(policy) / run_id / stage) for stage, _ in ANSWERS.values()}
    assert month.standalone is not None
    report = stage_report(DAG_IDS["provider"], month.standalone.env, run_id)
    stages = report.get("stages") or {}
    return {stage: str(((stages.get(stage) or {}).get("output") or {}).get("data_path") or "") for stage in stages}


def measured(month: Month, policy: PolicyName, started: float, ended: float) -> dict[str, Any]:
    """Spark's figures from the policy's event logs; the reserved core-seconds from the cluster manager."""
    figures = spark_figures(read_figures(month.events(policy)), started, ended)
    if month.target.kind == "yarn":
        figures.update(yarn_figures(yarn_apps(month.target.resourcemanager_url, started, ended)))
        figures["reserved_source"] = "YARN application reports (vcoreSeconds)"
    else:
        figures.update(reserved_core_s=figures["executor_core_s"], failed_applications=0)
        figures["reserved_source"] = "event logs (executors' lifetimes x cores)"
    return figures


def run_one(
    month: Month, policy: PolicyName, day: Day, scale: float, compute: Callable[[Path], dict[str, Rows]]
) -> dict[str, Any]:
    """One policy's run of one day: its result line."""
    assert month.standalone is not None
    tables = land_day(month, day, scale)
    run_id = f"month-{day.date}-{policy}-{int(time.time())}"
    load = os.getloadavg()[0]
    started, ended, state = trigger_and_wait(month.standalone, DAG_IDS[policy], run_id, day.date)
    line: dict[str, Any] = {
        "policy": policy,
        "date": day.date,
        "day": day.index,
        "weekday": day.weekday,
        "scale": scale,
        "pattern_scale": day.scale,
        "run_id": run_id,
        "state": state,
        "ok": state == "success",
        "wall_s": round(ended - started, 1),
        "wall_source": "trigger command to the run's end seen",
        "started": started,
        "ended": ended,
        "load_1m": [round(load, 2), round(os.getloadavg()[0], 2)],
        # Every JVM of the session inherits it (the cluster's, the tenant's, every policy's): unset, as users run.
        "java_tool_options": os.environ.get("JAVA_TOOL_OPTIONS"),
    }
    times = airflow_times(month.home, DAG_IDS[policy], run_id)
    if times is not None:
        line.update(wall_s=round(times[1] - times[0], 1), wall_source="Airflow's run start to end")
    line.update(measured(month, policy, started, ended))
    problems = ["run did not succeed"] if state != "success" else []
    if not problems:
        want = reference(month, scale, tables, compute)
        problems = answer_problems(want, answers_at(output_paths(month, policy, run_id)))
    line.update(answers_identical=not problems, answer_problems=problems[:10])
    return line
