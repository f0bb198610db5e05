"""A warm pool's folder: its state file, its start lock, its leases and the processes it owns.

Layout of a folder: ``pool.json`` (written by the supervisor: phase, url, pids, app id, UI, shape),
``start.lock`` (flock: one starter, or the idle stop, at a time), ``leases/`` (one flocked file per
region running in the pool), ``last_used`` (its mtime is the last use) and the two logs.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psutil  # type: ignore[import-untyped, unused-ignore]

from airflow_provider_finegrained.spark.process import live, with_descendants
from airflow_provider_finegrained.warm.server import FOLDER_CONF, SERVER_CLASS, PoolShape

STATE_FILE = "pool.json"
LOCK_FILE = "start.lock"
LEASES = "leases"
LAST_USED = "last_used"
SERVER_LOG = "server.log"
SUPERVISOR_LOG = "supervisor.log"
SUPERVISOR_MODULE = "airflow_provider_finegrained.warm.supervisor"


class WarmPoolUnavailable(RuntimeError):
    """The pool cannot be used: not running, unreachable, or it failed a trivial request."""


@dataclass(frozen=True)
class WarmPool:
    """A Spark Connect server to submit stages to."""

    url: str
    """``sc://127.0.0.1:PORT``."""
    folder: str | None
    """The pool's folder; None for an external ``sc://`` server."""
    shape: PoolShape | None
    """None when unknown (an external server)."""
    application_id: str | None
    ui_url: str | None
    started_at: float


def pool_from_state(folder: str, state: dict[str, Any]) -> WarmPool:
    shape = state.get("shape")
    return WarmPool(
        url=str(state["url"]),
        folder=folder,
        shape=None if shape is None else PoolShape.from_dict(shape),
        application_id=state.get("application_id"),
        ui_url=state.get("ui_url"),
        started_at=float(state.get("started_at", 0.0)),
    )


def read_state(folder: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(folder, STATE_FILE), encoding="utf-8") as handle:
            data = json.load(handle)
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def write_state(folder: str, state: dict[str, Any]) -> None:
    path = os.path.join(folder, STATE_FILE)
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        json.dump(state, handle, indent=2)
    os.replace(temporary, path)  # readers never see half a file


def remove_state(folder: str, supervisor_pid: int | None = None) -> None:
    """Remove the state file (only if it still names `supervisor_pid`, when given)."""
    state = read_state(folder)
    if state is None:
        return
    if supervisor_pid is None or state.get("supervisor_pid") == supervisor_pid:
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(folder, STATE_FILE))


@contextlib.contextmanager
def start_lock(folder: str, timeout_s: float | None) -> Iterator[bool]:
    """Hold the folder's start lock; yields False (not held) if `timeout_s` passes first (0: try once)."""
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, LOCK_FILE), "a+b") as handle:
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                if deadline is not None and time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.2)
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def touch_last_used(folder: str) -> None:
    path = os.path.join(folder, LAST_USED)
    with open(path, "a", encoding="utf-8"):
        pass
    os.utime(path)


def last_used(folder: str) -> float:
    try:
        return os.path.getmtime(os.path.join(folder, LAST_USED))
    except FileNotFoundError:
        return 0.0


@contextlib.contextmanager
def hold_lease(folder: str) -> Iterator[str]:
    """A flocked file in ``leases/`` for as long as the block runs; a dead holder's lock goes with it."""
    leases = os.path.join(folder, LEASES)
    os.makedirs(leases, exist_ok=True)
    name = f"{os.getpid()}-{uuid.uuid4().hex}"
    temporary = os.path.join(folder, f".{name}.lease")
    path = os.path.join(leases, name)
    handle = open(temporary, "w", encoding="utf-8")  # noqa: SIM115 - held open for the lease
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        # Locked before it appears in leases/, so the supervisor never sees it unlocked and reaps it.
        os.rename(temporary, path)
        yield path
    finally:
        touch_last_used(folder)
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        handle.close()


def live_leases(folder: str) -> int:
    """Leases whose holder is alive; files of dead holders (their flock released) are removed."""
    leases = os.path.join(folder, LEASES)
    count = 0
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(leases):
            path = os.path.join(leases, name)
            try:
                handle = open(path, "rb")  # noqa: SIM115
            except FileNotFoundError:
                continue
            with handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    count += 1
                    continue
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
    return count


def is_supervisor(pid: int | None, folder: str) -> psutil.Process | None:
    """The process `pid` if it is this folder's supervisor (a recycled pid is not)."""
    if pid is None:
        return None
    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(pid)
        cmdline = proc.cmdline()
        if SUPERVISOR_MODULE in cmdline and folder in cmdline and proc.status() != psutil.STATUS_ZOMBIE:
            return proc
    return None


def pool_processes(folder: str) -> list[psutil.Process]:
    """Every live process of the pool: its supervisor, its server JVM and their descendants."""
    marker = f"{FOLDER_CONF}={folder}"
    found: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            cmdline = proc.cmdline()
            server = SERVER_CLASS in cmdline and marker in cmdline
            supervisor = SUPERVISOR_MODULE in cmdline and folder in cmdline
            if (server or supervisor) and proc.status() != psutil.STATUS_ZOMBIE:
                found[proc.pid] = proc
    return live(with_descendants(found.values()))
