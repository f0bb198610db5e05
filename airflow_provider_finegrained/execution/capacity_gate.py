"""Declarative resources at run time (FLIP-138): a region asks for its executors before it is submitted.

The cluster's free capacity comes from the cluster manager (a standalone master's ``/json/``, YARN's
ResourceManager) or from the capacity the connection declares (local mode, Kubernetes). Regions of
this provider that were granted capacity but whose applications have not registered yet are held in
a reservation ledger under the storage root (``<root>/_capacity/<master>``, local or shared storage), so
parallel branches, on this worker or another host, do not both take the same free cores. No Airflow imports.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

import psutil  # type: ignore[import-untyped, unused-ignore]

from airflow_provider_finegrained.capacity import (
    ClusterCapacity,
    Reservation,
    ReservationLedger,
    declared_capacity,
    executor_request,
    local_request,
    subtract,
)
from airflow_provider_finegrained.launchers.standalone.capacity import fetch_standalone_capacity
from airflow_provider_finegrained.launchers.yarn.capacity import DEFAULT_QUEUE, fetch_yarn_capacity
from airflow_provider_finegrained.planning import ClusterProfile, RegionSizing, format_bytes
from airflow_provider_finegrained.planning.capacity import (
    CapacityDecision,
    CapacityOutcome,
    ExecutorRequest,
    decide_capacity,
    queue_capacity,
)
from airflow_provider_finegrained.storage.filesystem import StorageOptions
from airflow_provider_finegrained.storage.locations import is_local, join, plain_name

if TYPE_CHECKING:
    from airflow_provider_finegrained.settings import ConnectionSettings

LEDGER_FOLDER = "_capacity"


class CapacityWait(Exception):
    """Not even the region's minimum fits the free capacity now: wait (deferred) and ask again."""

    def __init__(self, message: str, request: ExecutorRequest) -> None:
        super().__init__(message)
        self.message = message
        self.request = request


class CapacityImpossible(Exception):
    """No worker could ever hold one executor of the region: fail before submitting."""


@dataclass(frozen=True)
class CapacitySource:
    """Where free capacity is read; JSON-safe so a trigger can carry it to the triggerer."""

    kind: str
    """``standalone`` (master /json/ URLs), ``yarn`` (ResourceManager URL) or ``declared``."""
    urls: tuple[str, ...] = ()
    cores: int = 0
    memory: int = 0
    gpus: float = 0
    """``declared``: the GPUs the connection declares (``total_gpus``)."""
    label: str = ""
    ledger_folder: str | None = None
    """The reservation ledger: a local folder or a URL under the storage root."""
    queue: str | None = None
    """YARN: the queue the application is submitted to (``spark.yarn.queue``); its headroom caps the capacity."""
    conn_id: str | None = None
    """The ``finegrained_spark`` connection whose storage options reach a ledger that is not local: the
    options hold secrets, so they never travel with the source; the side that opens the ledger resolves them."""
    storage_options: StorageOptions = field(default=None, compare=False, repr=False)
    """fsspec options for a ledger that is not local, in this process only (never in :meth:`to_dict`);
    None: not resolved (see :attr:`needs_storage_options`)."""

    @property
    def needs_storage_options(self) -> bool:
        """Whether the ledger is on shared storage and its options are still to be resolved from ``conn_id``."""
        return self.ledger_folder is not None and not is_local(self.ledger_folder) and self.storage_options is None

    def ledger(self) -> ReservationLedger | None:
        """The reservation ledger, if this source keeps one."""
        if self.ledger_folder is None:
            return None
        return ReservationLedger(self.ledger_folder, storage_options=self.storage_options)

    def with_storage_options(self, storage_options: StorageOptions) -> CapacitySource:
        return replace(self, storage_options=storage_options)

    def read(self) -> ClusterCapacity:
        """The free capacity now, minus regions granted but not registered with the cluster yet."""
        capacity = self.read_cluster()
        ledger = self.ledger()
        if ledger is None:
            return capacity
        with ledger.locked() as view:
            return subtract(capacity, view.reservations())

    def read_cluster(self) -> ClusterCapacity:
        if self.kind == "standalone":
            return fetch_standalone_capacity(list(self.urls))
        if self.kind == "yarn":
            return fetch_yarn_capacity(self.urls[0], queue=self.queue)
        return declared_capacity(self.cores, self.memory, self.label, total_gpus=self.gpus)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "urls": list(self.urls),
            "cores": self.cores,
            "memory": self.memory,
            "gpus": self.gpus,
            "label": self.label,
            "ledger_folder": self.ledger_folder,
            "queue": self.queue,
            "conn_id": self.conn_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CapacitySource:
        return cls(**{**data, "urls": tuple(data.get("urls", ()))})


def capacity_source(
    settings: ConnectionSettings, conn_id: str | None = None, storage_options: StorageOptions = None
) -> CapacitySource:
    """The capacity source of the connection's cluster manager (its launcher's ``capacity_kind``).

    Its ledger is ``<storage root>/_capacity/<master>`` on every storage root. ``conn_id``: the connection
    the settings come from, so that a trigger can resolve the storage options again; ``storage_options``:
    the root's fsspec options where the caller has them (the hook's ``storage_options()``), kept in this
    process only.
    """
    from airflow_provider_finegrained.launchers.select import submit_launcher

    if settings.storage_is_local:
        root = settings.storage_root.removeprefix("file://")
        ledger = os.path.join(root, LEDGER_FOLDER, plain_name(settings.master))
    else:
        ledger = join(settings.storage_root, LEDGER_FOLDER, plain_name(settings.master))
    common: dict[str, Any] = {"ledger_folder": ledger, "conn_id": conn_id, "storage_options": storage_options}
    kind = submit_launcher(settings).capacity_kind
    if kind == "standalone":
        return CapacitySource("standalone", tuple(settings.webui_json_urls()), **common)
    if kind == "yarn" and settings.yarn_resourcemanager_url:
        # Spark submits to YARN's "default" queue unless told otherwise: its headroom is what the region gets.
        queue = str(settings.spark_conf.get("spark.yarn.queue") or DEFAULT_QUEUE)
        return CapacitySource("yarn", (settings.yarn_resourcemanager_url,), queue=queue, **common)
    memory = settings.total_memory
    if kind == "local":
        # A local application is one JVM on this machine: the machine's memory is what bounds it.
        memory = max(memory, psutil.virtual_memory().total)
    gpus = settings.total_gpus
    return CapacitySource(
        "declared",
        cores=settings.total_cores,
        memory=memory,
        gpus=gpus,
        label=f"capacity declared for {settings.master}: {settings.total_cores} cores, {format_bytes(memory)}"
        + (f", {gpus:g} GPU(s)" if gpus else ""),
        **common,
    )


def region_request(
    sizing: RegionSizing, min_parallelism: int, count_overhead: bool = True, master: tuple[int, int] = (0, 0)
) -> ExecutorRequest:
    """What a sized region asks the cluster for.

    ``count_overhead`` False for a standalone master, which books only ``spark.executor.memory`` (and
    off-heap) against a worker's memory; YARN and Kubernetes containers hold the overhead too. ``master``:
    the cores and bytes of the container the application holds besides its executors (the launcher's
    ``master_container``: YARN's ApplicationMaster).
    """
    widest = max(s.widest for s in sizing.stages.values())
    if sizing.local:
        # Local mode: the driver JVM is the only executor; the machine's memory bounds it, not a container.
        return local_request(
            threads=sizing.executor_cores,
            task_cpus=sizing.task_cpus,
            driver_memory=sizing.executor_memory,
            driver_memory_overhead=0,
            off_heap_memory=sizing.off_heap_memory,
            parallelism=widest,
            min_parallelism=min_parallelism,
            gpus=sizing.executor_gpus,
        )
    request = executor_request(
        executors=sizing.executor_instances,
        executor_cores=sizing.executor_cores,
        task_cpus=sizing.task_cpus,
        executor_memory=sizing.executor_memory,
        memory_overhead=sizing.memory_overhead if count_overhead else 0,
        off_heap_memory=sizing.off_heap_memory,
        executor_gpus=sizing.executor_gpus,
        parallelism=widest,
        min_parallelism=min_parallelism,
    )
    return replace(request, master_cores=master[0], master_memory=master[1])


def reduced_profile(profile: ClusterProfile, sizing: RegionSizing, executors: int) -> ClusterProfile:
    """The cluster profile a region is sized again with when only ``executors`` of its planned ones fit."""
    per_executor = sizing.executor_memory + sizing.memory_overhead + sizing.off_heap_memory
    return replace(
        profile,
        total_cores=max(1, executors * sizing.executor_cores),
        total_memory=max(1, executors * per_executor),
    )


@dataclass
class Grant:
    """A region's capacity decision, and its reservation to release when the application ends."""

    decision: CapacityDecision
    capacity: ClusterCapacity
    source: CapacitySource
    reservation: Reservation | None = None

    def release(self) -> None:
        ledger = self.source.ledger()
        if self.reservation is not None and ledger is not None:
            ledger.release(self.reservation.key)
            self.reservation = None

    def trace(self, waited_s: float | None = None) -> dict[str, Any]:
        outcome = self.decision.outcome.value
        if waited_s:
            outcome = f"{outcome} after waiting"
        return {
            "outcome": outcome,
            "message": self.decision.message,
            "executors": self.decision.executors,
            "source": self.capacity.source,
            **({"waited_s": round(waited_s, 1)} if waited_s else {}),
        }


def acquire(
    source: CapacitySource, request: ExecutorRequest, key: str, app_name: str, cluster_queue: bool = False
) -> Grant:
    """Decide against the free capacity and reserve what was granted, atomically under the ledger lock.

    ``cluster_queue`` (the connection's ``admission``): ask for the whole request and leave the waiting to the
    cluster manager's queue; nothing is reserved, since the cluster manager, not this ledger, hands out what
    frees up. Raises CapacityImpossible when no worker can ever hold one executor, CapacityWait when not even
    the minimum fits now (never with ``cluster_queue``), and the source's error when the cluster cannot be asked.
    """
    if cluster_queue:
        capacity = source.read()
        return Grant(_decide(request, capacity, cluster_queue=True), capacity, source)
    ledger = source.ledger()
    if ledger is None:
        capacity = source.read()
        decision = _decide(request, capacity)
        return Grant(decision, capacity, source)
    cluster = source.read_cluster()  # outside the lock: a slow master must not block other regions
    request = request.in_containers_of(cluster.memory_step)  # the reservation books whole containers
    with ledger.locked() as view:
        held = view.reservations()
        superseded = earlier_tries(key, held)
        for earlier in superseded:
            view.remove(earlier.key)
        capacity = subtract(cluster, [r for r in held if r.key != key and r not in superseded])
        decision = _decide(request, capacity)
        reservation = Reservation(
            key=key,
            app_name=app_name,
            executors=decision.executors,
            executor_cores=request.cores,
            executor_memory=request.memory,
            gpus_per_executor=request.gpus,
            host=socket.gethostname(),
            pid=os.getpid(),
            created_at=time.time(),
            master_memory=request.master_memory,
            queue=source.queue or "",
        )
        view.add(reservation)
    return Grant(decision, capacity, source, reservation)


def earlier_tries(key: str, reservations: Sequence[Reservation]) -> list[Reservation]:
    """The reservations of earlier tries of the region ``key`` (``dag/run/region/try=N``) names.

    Airflow runs a retry only once it has failed the earlier try (a host cut off is failed by its heartbeat
    timeout), so their hold is over; left counted, it would hold the cluster from the retry itself until it
    went stale (15 minutes when made on another host).
    """
    region, _, tried = key.rpartition("/try=")
    if not region or not tried.isdigit():
        return []
    found = []
    for reservation in reservations:
        other, _, other_try = reservation.key.rpartition("/try=")
        if other == region and other_try.isdigit() and int(other_try) < int(tried):
            found.append(reservation)
    return found


def _decide(request: ExecutorRequest, capacity: ClusterCapacity, cluster_queue: bool = False) -> CapacityDecision:
    # Containers as the cluster manager allocates them (YARN rounds each up to its minimum allocation).
    sized = request.in_containers_of(capacity.memory_step)
    if cluster_queue:  # the cluster manager queues the application, ApplicationMaster limit included
        decision = queue_capacity(sized, capacity.workers)
    else:
        decision = decide_capacity(sized, capacity.workers, capacity.master_limit)
    if decision.outcome is CapacityOutcome.IMPOSSIBLE:
        raise CapacityImpossible(f"{decision.message} ({capacity.source})")
    if decision.outcome is CapacityOutcome.WAIT:
        raise CapacityWait(f"{decision.message} ({capacity.source})", request)
    return decision
