"""A ledger of capacity promised to regions whose applications hold no executor yet.

Between the moment a region decides from the cluster's free capacity and the moment its application's
first executor runs (a region asks for executors at its first job), the cluster still shows those
resources free; a parallel region (another Airflow worker process on this machine or on another host)
would count them again. Regions therefore decide and reserve under one exclusive lock, and subtract each
other's pending reservations from what the cluster reports.

The ledger is a folder: a local path, or a URL on the storage root (``hdfs://``, ``s3://``...) shared by
every host. Layout: one ``*.json`` object per reservation, written whole (readers see all of it or none),
and the lock: locally ``folder/.lock`` (``flock``); elsewhere ``folder/.lease``, a lease lock created
exclusively on the storage (``capacity.lease``).

A reservation ends when its region releases it, when the cluster lists its application (``subtract``), or
when it is stale: its holder process on this host is gone, a reservation of another host (whose processes
cannot be checked from here) is older than ``remote_max_age_s``, or any is older than ``max_age_s``.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import socket
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import psutil

from airflow_provider_finegrained.capacity.lease import DEFAULT_LEASE_S, LeaseLock
from airflow_provider_finegrained.capacity.ledger_folder import LedgerFolder, LocalFolder, StoredFolder
from airflow_provider_finegrained.capacity.sources import ClusterCapacity
from airflow_provider_finegrained.planning.capacity import MasterLimit
from airflow_provider_finegrained.storage.filesystem import StorageOptions
from airflow_provider_finegrained.storage.locations import is_local, join, normalize_root

DEFAULT_MAX_AGE_S = 24 * 3600.0
DEFAULT_REMOTE_MAX_AGE_S = 15 * 60.0
"""How long another host's reservation counts: the time a region may take from its decision to its
application's registration with the cluster (then ``subtract`` ignores it anyway). Its holder's pid cannot
be checked from here, so a dead worker's reservation would otherwise hold capacity for ``max_age_s``."""
LEASE_FILE = ".lease"
# psutil derives a start time from boot time and clock ticks; allow for its rounding against time.time().
_START_TIME_SLACK_S = 1.0


@dataclass(frozen=True)
class Reservation:
    """Executors a region was granted and has not yet seen its application hold (see the module docstring)."""

    key: str
    """Unique per attempt, e.g. ``dag/run/region/try``."""
    app_name: str
    """The Spark application name the region submits: once the cluster lists it, the cluster counts it."""
    executors: int
    executor_cores: int
    executor_memory: int
    """Bytes per executor including overhead and off-heap."""
    gpus_per_executor: float = 0
    host: str = field(default_factory=socket.gethostname)
    pid: int = field(default_factory=os.getpid)
    """The process holding the reservation: when it is gone, so is the reservation (checked on ``host`` only)."""
    created_at: float = field(default_factory=time.time)
    master_memory: int = 0
    """Bytes of its ApplicationMaster, held against ``queue``'s ApplicationMaster limit too (YARN)."""
    queue: str = ""

    def __post_init__(self) -> None:
        if not self.key or not self.app_name:
            raise ValueError("a reservation needs a key and an application name")
        amounts = (
            self.executors,
            self.executor_cores,
            self.executor_memory,
            self.gpus_per_executor,
            self.master_memory,
        )
        if min(amounts) < 0:
            raise ValueError(f"reservation {self.key!r} has a negative amount: {self}")

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Reservation:
        """Parse :meth:`to_json`'s output; ValueError for anything else."""
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("a reservation is a JSON object")
        types: dict[str, tuple[type, ...]] = {
            "key": (str,),
            "app_name": (str,),
            "executors": (int,),
            "executor_cores": (int,),
            "executor_memory": (int,),
            "gpus_per_executor": (int, float),
            "host": (str,),
            "pid": (int,),
            "created_at": (int, float),
            "master_memory": (int,),
            "queue": (str,),
        }
        required = set(types) - {"master_memory", "queue"}  # an earlier version's reservations lack these two
        if not required <= set(data) <= set(types):
            raise ValueError(f"reservation fields {sorted(data)} are not {sorted(types)}")
        for name, allowed in types.items():
            if name in data and (isinstance(data[name], bool) or not isinstance(data[name], allowed)):
                raise ValueError(f"reservation field {name!r} has the wrong type: {data[name]!r}")
        return cls(**data)


class LedgerView:
    """The ledger while its lock is held: read, add and remove reservations."""

    def __init__(
        self,
        folder: Path | LedgerFolder,
        max_age_s: float,
        remote_max_age_s: float = DEFAULT_REMOTE_MAX_AGE_S,
        usable_until: float | None = None,
    ) -> None:
        self._folder: LedgerFolder = LocalFolder(folder) if isinstance(folder, Path) else folder
        self._max_age_s = max_age_s
        self._remote_max_age_s = remote_max_age_s
        self._usable_until = usable_until
        self._open = True

    def reservations(self) -> list[Reservation]:
        """Live reservations, oldest first; stale ones (holder gone, or too old) are deleted on the way."""
        self._check_open()
        live = []
        for name in self._folder.names():
            try:
                reservation = Reservation.from_json(self._folder.read(name))
            except (OSError, ValueError):
                continue  # Not ours to judge (another version's format?): leave it, count nothing.
            if _is_stale(reservation, self._max_age_s, self._remote_max_age_s):
                self._folder.remove(name)
            else:
                live.append(reservation)
        return sorted(live, key=lambda r: (r.created_at, r.key))

    def add(self, reservation: Reservation) -> None:
        """Record a reservation (replacing one with the same key), atomically: readers see all of it or none."""
        self._check_open()
        self._folder.write(_file_name(reservation.key), reservation.to_json())

    def remove(self, key: str) -> bool:
        """Drop a reservation; False when there was none."""
        self._check_open()
        return self._folder.remove(_file_name(key))

    def _close(self) -> None:
        self._open = False

    def _check_open(self) -> None:
        if not self._open:
            raise RuntimeError("the ledger's lock was released: use the view only inside 'with ledger.locked()'")
        if self._usable_until is not None and time.time() >= self._usable_until:
            # A waiter on another host may break a lease it sees expired: writing now could race with it.
            raise RuntimeError("the capacity ledger's lease ran out while it was held: decide again")


class ReservationLedger:
    """Reservations in ``folder`` (a local path or a storage URL), shared by every process that reaches it.

    A local folder is locked with ``flock`` (every process that can ``flock`` files there: this machine, or
    hosts sharing a POSIX mount that honours it); any other location with a lease lock of ``lease_s``
    seconds on the storage itself, reached with ``storage_options`` (fsspec's, e.g. the storage connection's).
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        max_age_s: float = DEFAULT_MAX_AGE_S,
        *,
        storage_options: StorageOptions = None,
        lease_s: float = DEFAULT_LEASE_S,
        remote_max_age_s: float = DEFAULT_REMOTE_MAX_AGE_S,
    ) -> None:
        for name, value in (("max_age_s", max_age_s), ("lease_s", lease_s), ("remote_max_age_s", remote_max_age_s)):
            if not value > 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        location = os.fspath(folder)
        self.local = is_local(location)
        if location.lower().startswith(("file:", "local:")):
            location = normalize_root(location, "capacity ledger")  # a local path: flock
        self.location = location
        self.folder = Path(self.location)  # meaningful for a local ledger only
        self.max_age_s = max_age_s
        self.remote_max_age_s = remote_max_age_s
        self.lease_s = lease_s
        self.storage_options = storage_options

    @contextlib.contextmanager
    def locked(self, timeout_s: float | None = None) -> Iterator[LedgerView]:
        """Hold the ledger's exclusive lock; ``timeout_s`` None waits as long as it takes, else TimeoutError."""
        if not self.local:
            with self._leased(timeout_s) as view:
                yield view
            return
        self.folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.folder / ".lock", os.O_RDWR | os.O_CREAT, 0o666)
        try:
            _flock(fd, timeout_s, self.folder)
            view = LedgerView(self.folder, self.max_age_s, self.remote_max_age_s)
            try:
                yield view
            finally:
                view._close()
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _leased(self, timeout_s: float | None) -> Iterator[LedgerView]:
        lock = LeaseLock(join(self.location, LEASE_FILE), self.storage_options, self.lease_s)
        with lock.held(timeout_s) as lease:
            # Stop writing a while before the lease ends: another host's clock may run a little ahead of ours.
            usable_until = lease.expires_at - min(10.0, self.lease_s / 4)
            folder = StoredFolder(self.location, self.storage_options)
            view = LedgerView(folder, self.max_age_s, self.remote_max_age_s, usable_until)
            try:
                yield view
            finally:
                view._close()

    def release(self, key: str) -> bool:
        """Remove a reservation under the lock; idempotent (False when it was already gone)."""
        with self.locked() as view:
            return view.remove(key)


def subtract(capacity: ClusterCapacity, reservations: Sequence[Reservation]) -> ClusterCapacity:
    """Free capacity minus the executors of reservations whose application the cluster does not list yet.

    Executors are placed like the standalone master's ``spreadOut``: workers with the most free cores first,
    one executor per worker per round, only where one fits. An executor that fits nowhere still takes what is
    left (down to zero), because its application will claim the next freed resources before a later region.
    """
    pending = [r for r in reservations if r.app_name not in capacity.active_apps and r.executors > 0]
    if not pending:
        return capacity
    free = [[w.free_cores, w.free_memory, w.free_gpus] for w in capacity.workers]
    order = sorted(range(len(free)), key=lambda i: -free[i][0])  # stable: ties keep the cluster's order

    def fits(i: int, r: Reservation) -> bool:
        return free[i][0] >= r.executor_cores and free[i][1] >= r.executor_memory and free[i][2] >= r.gpus_per_executor

    for r in sorted(pending, key=lambda r: (r.created_at, r.key)):
        left = r.executors
        while left:
            usable = [i for i in order if fits(i, r)]
            if not usable:
                break
            for i in usable[:left]:
                free[i][0] -= r.executor_cores
                free[i][1] -= r.executor_memory
                free[i][2] -= r.gpus_per_executor
            left -= min(left, len(usable))
        need = [left * r.executor_cores, left * r.executor_memory, left * r.gpus_per_executor]
        for i in order:
            for d in range(3):
                take = min(free[i][d], need[d])
                free[i][d] -= take
                need[d] -= take
    workers = tuple(
        replace(w, free_cores=int(c), free_memory=int(m), free_gpus=g)
        for w, (c, m, g) in zip(capacity.workers, free, strict=True)
    )
    executors = sum(r.executors for r in pending)
    source = f"{capacity.source}; minus {executors} executor(s) reserved by {len(pending)} pending region(s)"
    return replace(capacity, workers=workers, source=source, master_limit=_with_pending_masters(capacity, pending))


def _with_pending_masters(capacity: ClusterCapacity, pending: Sequence[Reservation]) -> MasterLimit | None:
    """The queue's ApplicationMaster limit, the masters of pending regions in that queue held. Until the cluster
    lists the application YARN may count one too: a region may wait a poll longer, never sit ACCEPTED for good."""
    limit = capacity.master_limit
    held = sum(r.master_memory for r in pending if limit is not None and r.queue == limit.queue)
    return replace(limit, used=limit.used + held) if limit is not None and held else limit


def _is_stale(reservation: Reservation, max_age_s: float, remote_max_age_s: float) -> bool:
    age = time.time() - reservation.created_at
    if age > max_age_s:
        return True
    if reservation.host != socket.gethostname():
        # Another host's processes cannot be checked from here: its region has remote_max_age_s to get its
        # application listed by the cluster (after which subtract ignores the reservation anyway).
        return age > remote_max_age_s
    return not _holder_alive(reservation)


def _holder_alive(reservation: Reservation) -> bool:
    try:
        process = psutil.Process(reservation.pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False  # exited, not yet reaped by its parent
        # A process younger than the reservation reuses a dead holder's pid.
        return bool(process.create_time() <= reservation.created_at + _START_TIME_SLACK_S)
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True  # exists, owned by someone else: assume it still holds


def _file_name(key: str) -> str:
    """A readable, unique, filesystem-safe name for a key (keys hold slashes)."""
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", key).strip("._")[:80] or "reservation"
    return f"{readable}-{hashlib.sha256(key.encode('utf-8')).hexdigest()[:16]}.json"


def _flock(fd: int, timeout_s: float | None, folder: Path) -> None:
    if timeout_s is None:
        fcntl.flock(fd, fcntl.LOCK_EX)
        return
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"could not lock the capacity ledger {folder} within {timeout_s:g} s") from None
            time.sleep(0.05)
