"""The load figure: N concurrent DAG runs over both Airflow workers against one Spark cluster, N raised until
something gives.

Each level triggers N runs of one DAG at once and waits for all of them. It reports what a team would
plan with: runs per hour held, the runs that failed or needed a retry, how long a run took at that load,
and what the load took (the most applications the cluster ran at once, the most tasks waiting on the
capacity gate, the machine's load average). The levels stop at the first one where a run failed or a
task was retried: that is the first thing that gave.
"""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Sequence
from typing import Any

from rehearsal.runs import check_spread_region, psql, task_hosts, trigger
from rehearsal.services import Layout
from rehearsal.trials import spark_apps

POLL_S = 3.0


def _run_rows(plan: Layout, dag_id: str, run_ids: Sequence[str]) -> dict[str, tuple[str, float | None]]:
    """Per run: its state and, once ended, its seconds from start to end (the metadata database's own times)."""
    listed = ", ".join(f"'{run_id}'" for run_id in run_ids)
    rows = psql(
        plan,
        f"select run_id, state, extract(epoch from end_date - start_date) from dag_run where dag_id = '{dag_id}' "
        f"and run_id in ({listed})",
    )
    return {row[0]: (row[1], float(row[2]) if row[2] else None) for row in rows}


def _deferred_tasks(plan: Layout, dag_id: str, run_ids: Sequence[str]) -> int:
    listed = ", ".join(f"'{run_id}'" for run_id in run_ids)
    rows = psql(
        plan, f"select count(*) from task_instance where dag_id = '{dag_id}' and run_id in ({listed}) and "
        "state = 'deferred'",
    )  # fmt: skip
    return int(rows[0][0]) if rows else 0


def load_level(plan: Layout, dag_id: str, concurrent: int, timeout_s: float = 3600) -> dict[str, Any]:
    """``concurrent`` runs of ``dag_id`` triggered at once; what they did and what they took."""
    stamp = int(time.time())
    run_ids = [f"load-{concurrent}-{index}-{stamp}" for index in range(concurrent)]
    known = {app["id"] for app in spark_apps(plan)}
    started = time.monotonic()
    for run_id in run_ids:
        trigger(plan, dag_id, run_id)
    most_apps = most_deferred = 0
    loads: list[float] = []
    while True:
        rows = _run_rows(plan, dag_id, run_ids)
        ended = [run_id for run_id, (state, _) in rows.items() if state in ("success", "failed")]
        running_apps = [a for a in spark_apps(plan) if a["id"] not in known and a.get("state") == "RUNNING"]
        most_apps = max(most_apps, len(running_apps))
        most_deferred = max(most_deferred, _deferred_tasks(plan, dag_id, run_ids))
        loads.append(os.getloadavg()[0])
        if len(ended) == concurrent or time.monotonic() - started > timeout_s:
            break
        time.sleep(POLL_S)
    wall = time.monotonic() - started
    rows = _run_rows(plan, dag_id, run_ids)
    succeeded = [run_id for run_id, (state, _) in rows.items() if state == "success"]
    retried = sorted(
        f"{run_id}/{task}"
        for run_id in run_ids
        for task, seen in task_hosts(plan, dag_id, run_id).items()
        if seen["try"] > 1
    )
    checked = dag_id == "spread_region"
    answers = [check_spread_region(plan, run_id)["answers_equal"] for run_id in succeeded] if checked else []
    seconds = [s for _, s in rows.values() if s is not None]
    return {
        "concurrent": concurrent,
        "dag_id": dag_id,
        "wall_s": round(wall, 1),
        "succeeded": len(succeeded),
        "failed": sorted(set(run_ids) - set(succeeded)),
        "retried_tasks": retried,
        "answers_equal": all(answers) if answers else None,
        "runs_per_hour": round(len(succeeded) / wall * 3600, 1),
        "run_s_median": round(statistics.median(seconds), 1) if seconds else None,
        "run_s_max": round(max(seconds), 1) if seconds else None,
        "most_applications_at_once": most_apps,
        "most_tasks_deferred_at_once": most_deferred,
        "load_average_max": round(max(loads), 2),
    }


def load(plan: Layout, dag_id: str, levels: Sequence[int]) -> list[dict[str, Any]]:
    """Each level in turn, stopping after the first where a run failed or a task needed a retry."""
    results = []
    for concurrent in levels:
        result = load_level(plan, dag_id, concurrent)
        results.append(result)
        if result["failed"] or result["retried_tasks"] or result["answers_equal"] is False:
            break
    return results
