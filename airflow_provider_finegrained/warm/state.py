"""A warm pool's folder: its state file, its start lock, its leases and the processes it owns.

Layout of a folder: ``pool.json`` (written by the supervisor: phase, url, pids, app id, UI, shape, the
HMAC of its storage credentials),
``token`` (0600: the pool's Connect token, see ``warm.auth``), ``start.lock`` (flock: one starter, or
the idle stop, at a time), ``leases/`` (one flocked, heartbeating file per region running in the pool,
recording its Connect sessions), ``last_used`` (its mtime is the last use), the ready region driver's
socket ``driver.sock`` (0600) and the three logs.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import IO, Any

import psutil  # type: ignore[import-untyped, unused-ignore]

from airflow_provider_finegrained.spark.process_tree import live, with_descendants
from airflow_provider_finegrained.warm.auth import read_token
from airflow_provider_finegrained.warm.server import FOLDER_CONF, SERVER_CLASS, PoolShape

STATE_FILE = "pool.json"
LOCK_FILE = "start.lock"
LEASES = "leases"
LAST_USED = "last_used"
SERVER_LOG = "server.log"
SUPERVISOR_LOG = "supervisor.log"
SUPERVISOR_MODULE = "airflow_provider_finegrained.warm.supervisor"
DRIVER_MODULE = "airflow_provider_finegrained.warm.region_driver"
DRIVER_LOG = "driver.log"


class WarmPoolUnavailable(RuntimeError):
    """The pool cannot be used: not running, unreachable, or it failed a trivial request."""


@dataclass(frozen=True)
class WarmPool:
    """A Spark Connect server to submit stages to."""

    url: str
    """Public (never a token): ``sc://localhost:PORT`` for a pool the provider started (``sc://127.0.0.1:PORT``
    for one started by an earlier version), the server's URL for an external one."""
    folder: str | None
    """The pool's folder; None for an external ``sc://`` server."""
    shape: PoolShape | None
    """None when unknown (an external server)."""
    application_id: str | None
    ui_url: str | None
    started_at: float
    token: str | None = field(default=None, repr=False, compare=False)
    """Spark Connect's pre-shared token (a secret: kept out of the repr; see ``warm.auth.client_url``)."""
    storage_options: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)
    """fsspec options for the storage root, matching the ``spark.hadoop.*`` the server was started with: how a
    task reaches the region's job (secrets inside: kept out of the repr). None: fsspec's defaults."""


def pool_from_state(folder: str, state: dict[str, Any]) -> WarmPool:
    """The pool recorded in ``folder`` (its token read from the folder's owner-only token file)."""
    shape = state.get("shape")
    return WarmPool(
        url=str(state["url"]),
        folder=folder,
        shape=None if shape is None else PoolShape.from_dict(shape),
        application_id=state.get("application_id"),
        ui_url=state.get("ui_url"),
        started_at=float(state.get("started_at", 0.0)),
        token=read_token(folder),
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


HEARTBEAT_S = 2.0
"""How often a lease's holder touches its lease file."""
LEASE_STALE_S = 30.0
"""A lease whose heartbeat is older than this is expired even though its holder's lock is still held (a
frozen holder). A dead holder's lease is expired at once: its lock goes with it."""


class Lease:
    """A region's hold on a pool: a flocked file in ``leases/`` recording the Connect sessions it opens.

    When the holder dies (its lock is released) or stops beating, the pool's supervisor interrupts and
    releases those sessions, so a killed task's Spark jobs stop within seconds.
    """

    def __init__(self, pool: WarmPool, path: str | None = None, handle: IO[str] | None = None) -> None:
        self.pool = pool
        self.path = path
        self._handle = handle
        self._sessions: list[dict[str, str | None]] = []
        self._lock = threading.Lock()

    @property
    def sessions(self) -> list[str]:
        return [str(session["id"]) for session in self._sessions]

    def expired(self) -> bool:
        """The pool expired this lease (its file is gone while still held)."""
        return self._handle is not None and os.fstat(self._handle.fileno()).st_nlink == 0

    def record_session(self, session_id: str, user_id: str | None = None) -> None:
        """Record a Connect session before it runs anything, so the pool can stop it if this holder dies.

        Raises WarmPoolUnavailable when the pool has expired the lease (its heartbeat went stale).
        """
        if self._handle is None:
            return  # an external server: not the provider's to police
        with self._lock:
            if self.expired():
                raise WarmPoolUnavailable(
                    f"the lease on the warm pool {self.pool.url} expired (no heartbeat for {LEASE_STALE_S:g} s); "
                    "its sessions were interrupted"
                )
            self._sessions.append({"id": session_id, "user_id": user_id})
            self._write()

    def _write(self) -> None:
        assert self._handle is not None
        record = {"pid": os.getpid(), "url": self.pool.url, "sessions": self._sessions}
        self._handle.seek(0)
        self._handle.truncate()
        self._handle.write(json.dumps(record))
        self._handle.flush()

    def beat(self) -> None:
        if self._handle is not None:
            with contextlib.suppress(OSError):
                os.utime(self._handle.fileno())


@dataclass(frozen=True)
class ExpiredLease:
    """A lease the supervisor took away: whose, why, and the sessions to stop."""

    name: str
    reason: str
    pid: int | None
    sessions: tuple[tuple[str, str | None], ...]


def _heartbeat(lease: Lease, stop: threading.Event) -> None:
    while not stop.wait(HEARTBEAT_S):
        lease.beat()


@contextlib.contextmanager
def hold_lease(folder: str, pool: WarmPool) -> Iterator[Lease]:
    """A flocked, heartbeating file in ``leases/`` for as long as the block runs.

    A dead holder's lock goes with it, which the supervisor sees within a poll (half a second).
    """
    leases = os.path.join(folder, LEASES)
    os.makedirs(leases, exist_ok=True)
    name = f"{os.getpid()}-{uuid.uuid4().hex}"
    temporary = os.path.join(folder, f".{name}.lease")
    path = os.path.join(leases, name)
    handle = open(temporary, "w", encoding="utf-8")  # noqa: SIM115 - held open for the lease
    stop = threading.Event()
    beating: threading.Thread | None = None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        lease = Lease(pool, path, handle)
        lease._write()
        # Locked before it appears in leases/, so the supervisor never sees it unlocked and reaps it.
        os.rename(temporary, path)
        beating = threading.Thread(target=_heartbeat, args=(lease, stop), name="warm-lease-heartbeat", daemon=True)
        beating.start()
        yield lease
    finally:
        stop.set()
        if beating is not None:
            beating.join()
        touch_last_used(folder)
        # Removed before the lock is released: a lease that ends cleanly is never seen as a dead holder's.
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
        with contextlib.suppress(FileNotFoundError):
            os.remove(temporary)
        handle.close()


def _same_file(handle: IO[bytes], path: str) -> bool:
    """Whether ``path`` still names the open file (not removed, not replaced)."""
    try:
        return os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
    except FileNotFoundError:
        return False


def _record(handle: IO[bytes]) -> dict[str, Any]:
    handle.seek(0)
    try:
        data = json.loads(handle.read().decode("utf-8") or "{}")
    except (ValueError, UnicodeDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def live_leases(folder: str) -> int:
    """Leases whose holder is alive (files of dead holders are left for the supervisor to expire)."""
    leases = os.path.join(folder, LEASES)
    count = 0
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(leases):
            try:
                handle = open(os.path.join(leases, name), "rb")  # noqa: SIM115
            except FileNotFoundError:
                continue
            with handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError:
                    count += 1
    return count


def expire_leases(folder: str, stale_s: float = LEASE_STALE_S) -> list[ExpiredLease]:
    """Remove the leases of dead holders, and of holders whose heartbeat is older than ``stale_s``.

    Returns what each recorded (its sessions), for the caller to stop. Called by the pool's supervisor.
    """
    leases = os.path.join(folder, LEASES)
    expired: list[ExpiredLease] = []
    with contextlib.suppress(FileNotFoundError):
        for name in sorted(os.listdir(leases)):
            path = os.path.join(leases, name)
            try:
                handle = open(path, "rb")  # noqa: SIM115
            except FileNotFoundError:
                continue
            with handle:
                try:
                    fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    reason = "its holder died"
                except OSError:
                    age = time.time() - os.fstat(handle.fileno()).st_mtime
                    if age <= stale_s:
                        continue
                    reason = f"no heartbeat for {age:.0f} s"
                if not _same_file(handle, path):
                    continue  # ended cleanly between listing and locking
                record = _record(handle)
                sessions = tuple(
                    (str(session["id"]), session.get("user_id"))
                    for session in record.get("sessions", [])
                    if isinstance(session, dict) and session.get("id")
                )
                pid = record.get("pid")
                expired.append(ExpiredLease(name, reason, pid if isinstance(pid, int) else None, sessions))
                with contextlib.suppress(FileNotFoundError):
                    os.remove(path)
    return expired


def remove_leases(folder: str) -> None:
    """Remove every lease file (a pool that is gone has nothing left to police)."""
    leases = os.path.join(folder, LEASES)
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(leases):
            with contextlib.suppress(FileNotFoundError):
                os.remove(os.path.join(leases, name))


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
            # The ready driver and its forked children (their command line is the driver's) too.
            supervisor = (SUPERVISOR_MODULE in cmdline or DRIVER_MODULE in cmdline) and folder in cmdline
            if (server or supervisor) and proc.status() != psutil.STATUS_ZOMBIE:
                found[proc.pid] = proc
    return live(with_descendants(found.values()))
