"""Fault trials on the rehearsal's hosts, each repeatable, each judged on what a user would lose.

``cut_worker``: the Airflow worker host running a region's leader is unplugged while its application
runs. The scheduler fails the silent try after the heartbeat timeout and retries it on the other worker.
Survived when the run succeeds on the other host, its answers are right, and Spark ran one application
for the region in cluster mode (the retry reattached) or the lost try's output was never read in client
mode (the retry resubmitted; the first driver died with its executors).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from rehearsal.hosts import Host, stop_processes
from rehearsal.runs import psql, read_output, stage_results, storage_options, task_hosts, trigger, use_root, wait_run
from rehearsal.services import AIRFLOW, Layout, alive_spark_workers, hdfs_pid, start_spark_worker, wait_for

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


def _task_logs(plan: Layout, hostname: str, dag_id: str, run_id: str, pattern: str) -> str:
    """The text of a run's task logs matching ``pattern`` on the Airflow worker ``hostname`` ("" if none there)."""
    host = next((w for w in plan.workers if w.hostname == hostname), None)
    if host is None:
        return ""
    logs = host.folder / "home" / "airflow" / "logs" / f"dag_id={dag_id}" / f"run_id={run_id}"
    return "".join(p.read_text(errors="replace") for p in logs.glob(pattern))


def _evens_right(plan: Layout, dag_id: str, run_id: str) -> bool:
    """Whether the cut_region DAG's committed ``evens`` holds exactly the even numbers below 100,000."""
    stages = stage_results(plan, dag_id, run_id)
    rows = read_output(plan, stages["evens"]["output"]["path"]).to_pylist()
    return sorted(r["n"] for r in rows) == list(range(0, 100_000, 2))


def cut_worker(plan: Layout, mode: str, hold_s: int = HOLD_S, heal: str = "after_run") -> dict[str, Any]:
    """One trial: cut the leader's worker host mid-region in ``mode`` (client or cluster); what happened.

    ``heal``: when the cable goes back in: ``after_run``, or ``mid_retry`` (as soon as the retry on the other
    host runs: the cut-off try learns it is no longer the one, and Airflow kills it while the retry goes on).
    """
    dag_id, run_id = f"cut_region_{mode}", f"cut-{mode}-{int(time.time())}"
    known = {app["id"] for app in spark_apps(plan)}
    trigger(plan, dag_id, run_id, {"hold_s": hold_s})

    def leader_running() -> bool:
        # Registered with the master: executors come at the region's first job, after the driver's hold.
        leader = task_hosts(plan, dag_id, run_id).get("slow_numbers", {})
        new_apps = [app for app in spark_apps(plan) if app["id"] not in known]
        return leader.get("state") == "running" and bool(leader.get("host")) and bool(new_apps)

    wait_for(f"{dag_id}'s application registered", leader_running, 240)
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
    name = f"cut_worker_{mode}" + ("_heal" if heal == "mid_retry" else "")
    result: dict[str, Any] = {"trial": name, "heal": heal, "run_id": run_id, "cut": victim.hostname,
                              "state": state, "tasks": tasks,
                              "applications": [(app["id"], app.get("state")) for app in apps]}  # fmt: skip
    if state == "success":
        result["answers_equal"] = _evens_right(plan, dag_id, run_id)
    result["retry_found"] = _retry_found(plan, dag_id, run_id, tasks.get("slow_numbers", {}))
    moved = tasks.get("slow_numbers", {}).get("host") not in ("", victim.hostname)
    one_app = len(apps) == 1
    result["survived"] = bool(
        state == "success" and moved and result.get("answers_equal") and (one_app if mode == "cluster" else True)
    )
    return result


def _retry_found(plan: Layout, dag_id: str, run_id: str, leader: dict[str, Any]) -> str | None:
    """What the leader's last try found when it reattached (``RUNNING``, ``FINISHED``), from its log; None if none."""
    text = _task_logs(
        plan, str(leader.get("host")), dag_id, run_id, f"task_id=slow_numbers/attempt={leader.get('try')}.log"
    )
    found = re.search(r"reattached to \S+ submitted by try \d+ \(\S+ \S+ is ([A-Z]+)\)", text)
    return found.group(1) if found else None


def lose_spark_worker(plan: Layout, task_s: int = 10) -> dict[str, Any]:
    """One trial: every process on Spark worker host E dies (a lost machine) while a task of a stage runs on it.

    Survived when Spark ran the lost tasks again on F, the run succeeds with the right answer in one try, and
    the stage's progress lines in the task log say tasks failed. E's worker is started again afterwards.
    """
    dag_id, run_id = "lose_worker", f"lose-worker-{int(time.time())}"
    lost = plan.spark_workers[0]
    trigger(plan, dag_id, run_id, {"task_s": task_s})

    def running_on_lost_host() -> bool:
        # Granted cores are not enough: an executor that has not registered yet runs nothing, and losing it
        # exercises nothing. The driver's log says where each task started.
        host = task_hosts(plan, dag_id, run_id).get("slow_rows", {}).get("host")
        text = _task_logs(plan, str(host), dag_id, run_id, "task_id=slow_rows/attempt=1.log") if host else ""
        return f"({lost.hostname},executor" in text

    wait_for(f"a task of {dag_id} running on {lost.hostname}", running_on_lost_host, 240)
    time.sleep(task_s / 2)  # mid-task
    stop_processes([lost], grace=0.0)
    try:
        state = wait_run(plan, dag_id, run_id, timeout=600)
    finally:
        start_spark_worker(lost, f"spark://{plan.spark_master.hostname}:7077")
        wait_for("the lost Spark worker back", lambda: alive_spark_workers(plan) == len(plan.spark_workers), 120)
    tasks = task_hosts(plan, dag_id, run_id)
    result: dict[str, Any] = {"trial": "lose_spark_worker", "run_id": run_id, "lost": lost.hostname, "state": state,
                              "tasks": tasks}  # fmt: skip
    if state == "success":
        stages = stage_results(plan, dag_id, run_id)
        rows = read_output(plan, stages["slow_rows"]["output"]["path"]).to_pylist()
        result["answers_equal"] = sorted((r["n"], r["square"]) for r in rows) == [(n, n * n) for n in range(8)]
        text = _task_logs(plan, tasks["slow_rows"]["host"], dag_id, run_id, "task_id=*/attempt=*.log")
        result["log_says_failed"] = " failed" in text and "[finegrained] stage slow_rows" in text
    else:
        result["log_says_failed"] = False
    result["survived"] = bool(
        state == "success"
        and tasks["slow_rows"]["try"] == 1
        and result.get("answers_equal")
        and result.get("log_says_failed")
    )
    return result


def restart_control(plan: Layout, component: str, dag_id: str, waiting: str) -> dict[str, Any]:
    """One trial: restart ``component`` (``scheduler``, ``triggerer``) on host A while the region's leader is
    ``waiting`` (``running``, ``deferred``) on its application. Survived when the run succeeds with the right
    answer and Spark ran exactly one application for the region (neither killed nor duplicated)."""
    run_id = f"restart-{component}-{int(time.time())}"
    known = {app["id"] for app in spark_apps(plan)}
    trigger(plan, dag_id, run_id, {"hold_s": 40})

    def leader_waiting() -> bool:
        leader = task_hosts(plan, dag_id, run_id).get("slow_numbers", {})
        return leader.get("state") == waiting and any(app["id"] not in known for app in spark_apps(plan))

    wait_for(f"{dag_id}'s leader {waiting}", leader_waiting, 240)
    a = plan.control
    stop_pid(int((a.logs / f"{component}.pid").read_text()))
    a.spawn(component, [AIRFLOW, component], plan.airflow_env())
    state = wait_run(plan, dag_id, run_id, timeout=900)
    apps = [app for app in spark_apps(plan) if app["id"] not in known]
    result: dict[str, Any] = {"trial": f"restart_{component}", "run_id": run_id, "state": state,
                              "tasks": task_hosts(plan, dag_id, run_id),
                              "applications": [(app["id"], app.get("state")) for app in apps]}  # fmt: skip
    if state == "success":
        result["answers_equal"] = _evens_right(plan, dag_id, run_id)
    result["survived"] = bool(state == "success" and result.get("answers_equal") and len(apps) == 1)
    return result


def storage_unreachable(plan: Layout, kind: str, stall_s: int = 30, hold_s: int = 20) -> dict[str, Any]:
    """One trial: the storage root (``kind``: the S3 API or HDFS on host D) stops answering for ``stall_s``
    seconds just as a client-mode region's job starts writing to it (the process is frozen, so connections
    hang as they do behind a dead switch, rather than being refused).

    Survived when the run ends with the right answer, and nothing was half-published: the stage's output has
    exactly one commit marker, and it lists only files that are there. A try that failed on the way must
    have said clearly that the storage was the trouble; its retry then ran.
    """
    dag_id, run_id = "cut_region_client", f"storage-{kind}-{int(time.time())}"
    use_root(plan, kind)
    known = {app["id"] for app in spark_apps(plan)}
    trigger(plan, dag_id, run_id, {"hold_s": hold_s})

    def registered() -> bool:
        leader = task_hosts(plan, dag_id, run_id).get("slow_numbers", {})
        return leader.get("state") == "running" and any(app["id"] not in known for app in spark_apps(plan))

    wait_for(f"{dag_id}'s application registered", registered, 240)
    time.sleep(max(0, hold_s - 3))  # the driver's hold ends and the job starts within the stall
    pid = hdfs_pid(plan) if kind == "hdfs" else int((plan.storage.logs / "s3.pid").read_text())
    os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(stall_s)
    finally:
        os.kill(pid, signal.SIGCONT)
    state = wait_run(plan, dag_id, run_id, timeout=900)
    tasks = task_hosts(plan, dag_id, run_id)
    result: dict[str, Any] = {"trial": f"storage_unreachable_{kind}", "run_id": run_id, "stall_s": stall_s,
                              "state": state, "tasks": tasks}  # fmt: skip
    if state == "success":
        result["answers_equal"] = _evens_right(plan, dag_id, run_id)
        result["commit_markers"] = _commit_markers(plan, stage_results(plan, dag_id, run_id)["evens"])
    errors = [
        line.strip()[:300]
        for host in {t["host"] for t in tasks.values() if t.get("host")}
        for line in _task_logs(plan, host, dag_id, run_id, "task_id=*/attempt=*.log").splitlines()
        if '"level":"error"' in line or "ERROR" in line
    ]
    result["errors"] = errors[:5]
    retried = any(t["try"] > 1 for t in tasks.values())
    result["survived"] = bool(
        state == "success"
        and result.get("answers_equal")
        and result.get("commit_markers") == 1
        and (not retried or any(kind.upper() in e.upper() or "storage" in e.lower() for e in errors))
    )
    use_root(plan, "s3")
    return result


def _commit_markers(plan: Layout, stage: dict[str, Any]) -> int:
    """How many commit markers a stage's output has over all of its tries (one: nothing was published twice)."""
    from airflow_provider_finegrained.runtime.output import MARKER, TRY_PREFIX
    from airflow_provider_finegrained.storage import filesystem

    path = str(stage["output"]["path"]).rstrip("/")
    stage_folder = path[: path.index(f"/{TRY_PREFIX}")] if f"/{TRY_PREFIX}" in path else path
    files = filesystem.list_files(stage_folder, storage_options(plan, stage_folder))
    return sum(1 for name in files if name.rsplit("/", 1)[-1] == MARKER)


def stop_pid(pid: int, grace: float = 30.0) -> None:
    """SIGTERM a process (and SIGKILL it after ``grace`` seconds), as a service manager restarts one."""
    import psutil

    with contextlib.suppress(psutil.NoSuchProcess):
        process = psutil.Process(pid)
        process.terminate()
        try:
            process.wait(grace)
        except psutil.TimeoutExpired:
            process.kill()


TRIALS: dict[str, Callable[[Layout], dict[str, Any]]] = {
    "cut_worker_cluster": lambda plan: cut_worker(plan, "cluster"),
    "cut_worker_client": lambda plan: cut_worker(plan, "client"),
    # Held long enough that the retry reattaches to a running application before the cut host comes back.
    "cut_worker_cluster_heal": lambda plan: cut_worker(plan, "cluster", hold_s=300, heal="mid_retry"),
    "lose_spark_worker": lose_spark_worker,
    "restart_scheduler": lambda plan: restart_control(plan, "scheduler", "cut_region_client", "running"),
    "restart_triggerer": lambda plan: restart_control(plan, "triggerer", "cut_region_cluster_deferred", "deferred"),
    "storage_unreachable_s3": lambda plan: storage_unreachable(plan, "s3"),
    "storage_unreachable_hdfs": lambda plan: storage_unreachable(plan, "hdfs"),
}
"""Every trial ``python -m rehearsal trial --trials`` knows, by name."""
