"""Fault trials on the rehearsal's hosts, each repeatable, each judged on what a user would lose.

``cut_worker``: the Airflow worker host running a region's leader is unplugged while its application
runs. The scheduler fails the silent try after the heartbeat timeout and retries it on the other worker.
Survived when the run succeeds on the other host, its answers are right, and Spark ran one application
for the region in cluster mode (the retry reattached) or the lost try's output was never read in client
mode (the retry resubmitted; the first driver died with its executors).
"""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

from rehearsal.hosts import Host
from rehearsal.runs import psql, read_output, stage_results, task_hosts, trigger, wait_run
from rehearsal.services import Layout, wait_for

HOLD_S = 60
"""How long the leader's driver waits before its job: time for the trial to find and cut its host."""


def spark_apps(plan: Layout) -> list[dict[str, Any]]:
    """Every application the standalone master knows, running or completed."""
    url = f"http://{plan.spark_master.address}:8080/json/"
    with urllib.request.urlopen(url, timeout=10) as response:
        status = json.load(response)
    return [*status.get("activeapps", []), *status.get("completedapps", [])]


def _host_named(plan: Layout, hostname: str) -> Host:
    return next(worker for worker in plan.workers if worker.hostname == hostname)


def cut_worker(plan: Layout, mode: str, hold_s: int = HOLD_S, heal: str = "after_run") -> dict[str, Any]:
    """One trial: cut the leader's worker host mid-region in ``mode`` (client or cluster); what happened.

    ``heal``: when the cable goes back in: ``after_run``, or ``mid_retry`` (as soon as the retry on the other
    host runs: the cut-off try learns it is no longer the one, and Airflow kills it while the retry goes on).
    """
    dag_id, run_id = f"cut_region_{mode}", f"cut-{mode}-{int(time.time())}"
    known = {app["id"] for app in spark_apps(plan)}
    trigger(plan, dag_id, run_id, {"hold_s": hold_s})

    def leader_running() -> bool:
        leader = task_hosts(plan, dag_id, run_id).get("slow_numbers", {})
        new_apps = [app for app in spark_apps(plan) if app["id"] not in known and app.get("state") == "RUNNING"]
        return leader.get("state") == "running" and bool(leader.get("host")) and bool(new_apps)

    wait_for(f"{dag_id}'s application running", leader_running, 240)
    victim = _host_named(plan, task_hosts(plan, dag_id, run_id)["slow_numbers"]["host"])
    victim.cut()
    try:
        if heal == "mid_retry":
            retried = f"select 1 from task_instance where dag_id = '{dag_id}' and run_id = '{run_id}' and task_id = "
            retried += "'slow_numbers' and try_number > 1 and state = 'running'"
            wait_for("the retry running", lambda: bool(psql(plan, retried)), 600)
            time.sleep(5)
            victim.plug()
        state = wait_run(plan, dag_id, run_id, timeout=900)
    finally:
        victim.plug()
    tasks = task_hosts(plan, dag_id, run_id)
    apps = [app for app in spark_apps(plan) if app["id"] not in known]
    result: dict[str, Any] = {"trial": f"cut_worker_{mode}", "heal": heal, "run_id": run_id, "cut": victim.hostname,
                              "state": state, "tasks": tasks,
                              "applications": [(app["id"], app.get("state")) for app in apps]}  # fmt: skip
    if state == "success":
        stages = stage_results(plan, dag_id, run_id)
        rows = read_output(plan, stages["evens"]["output"]["path"]).to_pylist()
        result["answers_equal"] = sorted(r["n"] for r in rows) == list(range(0, 100_000, 2))
    moved = tasks.get("slow_numbers", {}).get("host") not in ("", victim.hostname)
    one_app = len(apps) == 1
    result["survived"] = bool(
        state == "success" and moved and result.get("answers_equal") and (one_app if mode == "cluster" else True)
    )
    return result
