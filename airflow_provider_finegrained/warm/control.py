"""A pool's processes seen from outside: whether it runs, its status, stopping it (and reaping what it started)."""

from __future__ import annotations

import contextlib
import os
import subprocess
import time
from typing import Any

import psutil  # type: ignore[import-untyped, unused-ignore]

from airflow_provider_finegrained.spark.process_tree import ProcessTreeSurvivedError, terminate_processes, wait_gone
from airflow_provider_finegrained.warm.auth import remove_token
from airflow_provider_finegrained.warm.state import (
    is_supervisor,
    last_used,
    live_leases,
    pool_processes,
    read_state,
    remove_leases,
    remove_state,
    start_lock,
)

STOP_TIMEOUT_S = 60.0
# Supervisors this process started: polled so that they do not linger as zombies once they exit.
_children: list[subprocess.Popen[bytes]] = []


class WarmPoolStopError(RuntimeError):
    """Processes of the pool survived SIGKILL."""


def remember_child(supervisor: subprocess.Popen[bytes]) -> None:
    """Reap `supervisor`, which this process started, once it exits (:func:`reap`)."""
    _children.append(supervisor)


def reap() -> None:
    """Collect the exit status of the supervisors this process started that have exited."""
    for child in list(_children):
        if child.poll() is not None:
            _children.remove(child)


def log_tail(folder: str, name: str, lines: int = 25) -> str:
    """The last `lines` of the folder's log `name`, headed by its name, for an error message."""
    try:
        with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as handle:
            tail = handle.read().splitlines()[-lines:]
    except FileNotFoundError:
        return f"(no {name})"
    return f"--- {name} (last {len(tail)} lines)\n" + "\n".join(tail)


def running_state(folder: str) -> dict[str, Any] | None:
    """The state of the folder's pool if its supervisor is alive and the server is up."""
    state = read_state(folder)
    if state and state.get("phase") == "running" and is_supervisor(state.get("supervisor_pid"), folder):
        return state
    return None


def kill_all(folder: str, grace_s: float = 30.0) -> bool:
    """Stop the supervisor (it stops its server), then anything of the pool still alive; remove the state.

    Returns whether any process of the pool was running (stale state alone does not count).
    Raises WarmPoolStopError if a process survives SIGKILL.
    """
    reap()
    state = read_state(folder)
    found = pool_processes(folder)
    supervisor = is_supervisor(state.get("supervisor_pid") if state else None, folder)
    if supervisor is not None:
        with contextlib.suppress(psutil.Error):
            supervisor.terminate()
        wait_gone([supervisor], grace_s)
        reap()
    try:
        terminate_processes(lambda: pool_processes(folder), 10.0, f"warm pool in {folder}", before_check=reap)
    except ProcessTreeSurvivedError as exc:
        raise WarmPoolStopError(str(exc)) from exc
    remove_state(folder)
    remove_token(folder)  # the next pool gets a token of its own
    remove_leases(folder)
    return bool(found)


def stop(folder: str, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """Stop the folder's pool and wait until every process of it is gone; False if none was running.

    Waits (up to `timeout_s`) for a start in progress to finish first, so it stops that pool too.
    """
    folder = os.path.abspath(folder)
    if not os.path.isdir(folder):
        return False
    with start_lock(folder, timeout_s):
        return kill_all(folder)


def status(folder: str) -> dict[str, Any] | None:
    """The folder's pool as recorded, with whether it lives, its processes, RSS, leases and idle time."""
    folder = os.path.abspath(folder)
    reap()
    state = read_state(folder)
    procs = pool_processes(folder)
    if state is None and not procs:
        return None
    info: dict[str, Any] = dict(state or {"phase": "orphaned"})
    alive = state is not None and is_supervisor(state.get("supervisor_pid"), folder) is not None
    if state is not None and not alive:
        info["phase"] = "stale"
    rss = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            rss += int(proc.memory_info().rss)
    used = max(last_used(folder), float(info.get("ready_at", 0.0)))
    info.update(
        folder=folder,
        alive=alive,
        pids=sorted(p.pid for p in procs),
        rss_bytes=rss,
        leases=live_leases(folder),
        idle_s=round(time.time() - used, 1) if used else None,
    )
    return info
