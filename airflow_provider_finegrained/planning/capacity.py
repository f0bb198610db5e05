"""Declarative resources (FLIP-138) and the minimum/maximum stability check (FLINK-15959).

A region declares the executors it wants; given what the cluster has free, it runs as asked, runs
smaller (never below its minimum parallelism), or cannot run now, with the numbers to say why
(:func:`decide_capacity`). Where the cluster manager queues applications itself, a region may instead
ask for all it wants and wait there for what is not free (:func:`queue_capacity`). A queue may also cap what its
ApplicationMasters hold (:class:`MasterLimit`): a region whose master does not fit waits, whatever else is free.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from airflow_provider_finegrained.planning.units import format_bytes

EXECUTOR_IDLE_TIMEOUT_S = 30
"""Seconds Spark keeps an idle executor, with or without shuffle data (``spark.dynamicAllocation``'s
``executorIdleTimeout`` and ``shuffleTracking.timeout``): a region's own application and a warm pool alike
give executors back to a shared cluster this soon (Spark's defaults: 60 s, and never while shuffle files are
kept)."""


@dataclass(frozen=True)
class ExecutorRequest:
    """What a region asks for: ``executors`` of one shape, to run ``parallelism`` tasks."""

    executors: int
    cores: int
    memory: int
    """Bytes per executor including overhead and off-heap: what a worker must hold."""
    parallelism: int
    min_parallelism: int = 1
    slots_per_executor: int = 1
    gpus: float = 0
    master_cores: int = 0
    master_memory: int = 0
    """One more container the application holds on some worker besides its executors: YARN's
    ApplicationMaster (which runs the driver in cluster mode) or a standalone cluster-mode driver; 0 where
    there is none."""

    @property
    def slots(self) -> int:
        return self.executors * self.slots_per_executor

    @property
    def has_master(self) -> bool:
        return self.master_cores > 0 or self.master_memory > 0

    def in_containers_of(self, step: int) -> ExecutorRequest:
        """This request with each container's memory rounded up to a multiple of ``step`` bytes, as YARN
        allocates (``yarn.scheduler.minimum-allocation-mb``); unchanged when ``step`` is 0."""
        if step <= 0:
            return self
        return replace(
            self, memory=math.ceil(self.memory / step) * step, master_memory=math.ceil(self.master_memory / step) * step
        )


@dataclass(frozen=True)
class WorkerCapacity:
    """One worker's free (and, for the hopeless check, total) resources."""

    free_cores: int
    free_memory: int
    free_gpus: float = 0
    total_cores: int | None = None
    total_memory: int | None = None
    total_gpus: float | None = None


@dataclass(frozen=True)
class MasterLimit:
    """What a queue lets its applications' master containers hold (YARN Capacity Scheduler's
    ``maximum-am-resource-percent``, per queue and per user), in bytes of memory: an application whose
    ApplicationMaster does not fit stays ACCEPTED, holding nothing, until others' masters end."""

    queue: str
    limit: int
    """Bytes the queue's ApplicationMasters may hold together."""
    used: int
    """Bytes they hold now."""
    user: str | None = None
    """The user the region's application runs as, when the queue reports a per-user limit."""
    user_limit: int | None = None
    """Bytes one user's ApplicationMasters may hold; None: not reported."""
    user_used: int = 0
    """Bytes ``user``'s ApplicationMasters hold now."""

    def refusal(self, master_memory: int) -> str | None:
        """Why a master of ``master_memory`` bytes would not start now; None when it would.

        The scheduler starts one anyway while no master holds any memory in the queue (a limit too small for
        one application must not block the queue for good).
        """
        if self.used <= 0:
            return None
        need = format_bytes(master_memory)
        if self.used + master_memory > self.limit:
            return (
                f"queue {self.queue}: ApplicationMasters may hold {format_bytes(self.limit)}, "
                f"{format_bytes(self.used)} held, this region's needs {need}"
            )
        if self.user_limit is not None and self.user_used + master_memory > self.user_limit:
            who = f"user {self.user}" if self.user else "one user"  # unnamed: none of its masters counted
            return (
                f"queue {self.queue}: {who}'s ApplicationMasters may hold {format_bytes(self.user_limit)}, "
                f"{format_bytes(self.user_used)} held, this region's needs {need}"
            )
        return None


class CapacityOutcome(StrEnum):
    AS_REQUESTED = "as_requested"
    REDUCED = "reduced"
    QUEUED = "queued"
    WAIT = "wait"
    IMPOSSIBLE = "impossible"


@dataclass(frozen=True)
class CapacityDecision:
    outcome: CapacityOutcome
    executors: int
    parallelism: int
    """The most tasks that keep the planned number of waves on the granted slots (never below the minimum);
    a caller may instead keep each stage's parallelism and run more waves."""
    message: str

    @property
    def can_run(self) -> bool:
        return self.outcome in (CapacityOutcome.AS_REQUESTED, CapacityOutcome.REDUCED, CapacityOutcome.QUEUED)


def decide_capacity(
    request: ExecutorRequest, workers: Sequence[WorkerCapacity], master_limit: MasterLimit | None = None
) -> CapacityDecision:
    """Compare a region's request with the workers' free resources (FLIP-138's declarative step).

    ``workers`` may be a single pseudo-worker holding a cluster's aggregate free capacity when the
    cluster manager does not report per worker (YARN metrics, a declared capacity). ``master_limit``: what the
    queue lets ApplicationMasters hold; a region whose master does not fit waits, however many cores are free.
    """
    impossible = _never_fits(request, workers)
    if impossible is not None:
        return impossible
    refused = master_limit.refusal(request.master_memory) if master_limit and request.has_master else None
    if refused is not None:
        return CapacityDecision(CapacityOutcome.WAIT, 0, 0, f"no room for the region's ApplicationMaster: {refused}")
    asked = _describe(request)
    fitting = _fitting(request, workers)
    free = _describe_free(workers)
    if fitting >= request.executors:
        return CapacityDecision(
            CapacityOutcome.AS_REQUESTED,
            request.executors,
            request.parallelism,
            f"running as planned: {request.executors} executor(s) of {asked}; free: {free}",
        )
    granted_slots = fitting * request.slots_per_executor
    minimum = min(request.min_parallelism, request.slots)
    if fitting >= 1 and granted_slots >= minimum:
        # Keep the planned number of waves on the smaller set of slots, never below the minimum.
        waves = math.ceil(request.parallelism / request.slots)
        parallelism = max(request.min_parallelism, min(request.parallelism, granted_slots * waves))
        return CapacityDecision(
            CapacityOutcome.REDUCED,
            fitting,
            parallelism,
            f"running smaller: asked for {request.executors} executor(s) of {asked}, {fitting} fit ({free})",
        )
    return CapacityDecision(
        CapacityOutcome.WAIT,
        0,
        0,
        f"not enough free resources: asked for {request.executors} executor(s) of {asked} "
        f"(at least {max(1, math.ceil(minimum / request.slots_per_executor))} for min parallelism "
        f"{request.min_parallelism}); free: {free}",
    )


def queue_capacity(request: ExecutorRequest, workers: Sequence[WorkerCapacity]) -> CapacityDecision:
    """Ask for the whole request and let the cluster manager queue what is not free (its own first come, first
    served), never smaller and never held back here; only a request no worker could ever hold is refused.

    On a busy shared cluster this keeps the cluster full where :func:`decide_capacity` would run a region on
    the few executors free at that moment for its whole life, or hold it back (docs/simulation.md).
    """
    impossible = _never_fits(request, workers)
    if impossible is not None:
        return impossible
    fitting = min(request.executors, _fitting(request, workers))
    return CapacityDecision(
        CapacityOutcome.QUEUED,
        request.executors,
        request.parallelism,
        f"asking the cluster manager for {request.executors} executor(s) of {_describe(request)}, "
        f"{fitting} of them free now ({_describe_free(workers)}); it queues the rest",
    )


def _never_fits(request: ExecutorRequest, workers: Sequence[WorkerCapacity]) -> CapacityDecision | None:
    """The refusal when no worker could hold one executor even idle; None when one could (or totals are unknown)."""
    verdicts = [_fits_when_empty(request, w) for w in workers]
    if not verdicts or not all(v is False for v in verdicts):
        return None
    biggest = max(workers, key=lambda w: (w.total_memory or 0, w.total_cores or 0))
    return CapacityDecision(
        CapacityOutcome.IMPOSSIBLE,
        0,
        0,
        f"no worker can ever hold one executor of {_describe(request)}: the largest has "
        f"{biggest.total_cores} cores, {format_bytes(biggest.total_memory or 0)}"
        + (f", {biggest.total_gpus:g} GPUs" if request.gpus else ""),
    )


def _fitting(request: ExecutorRequest, workers: Sequence[WorkerCapacity]) -> int:
    """How many executors fit, once the master container (if any) has the worker where it costs fewest."""
    total = [_executors_fitting(request, w) for w in workers]
    if not request.has_master:
        return sum(total)
    best = 0  # no worker holds the master: no executor can start either
    for index, worker in enumerate(workers):
        if worker.free_cores >= request.master_cores and worker.free_memory >= request.master_memory:
            rest = replace(
                worker,
                free_cores=worker.free_cores - request.master_cores,
                free_memory=worker.free_memory - request.master_memory,
            )
            best = max(best, sum(total) - total[index] + _executors_fitting(request, rest))
    return best


def _executors_fitting(request: ExecutorRequest, worker: WorkerCapacity) -> int:
    limits = [worker.free_cores // request.cores, worker.free_memory // request.memory]
    if request.gpus:
        limits.append(math.floor(worker.free_gpus / request.gpus))
    return max(0, min(limits))


def _fits_when_empty(request: ExecutorRequest, worker: WorkerCapacity) -> bool | None:
    """Whether one executor fits this worker when idle; None when its totals are unknown."""
    if worker.total_cores is None or worker.total_memory is None:
        return None
    fits = request.cores <= worker.total_cores and request.memory <= worker.total_memory
    if request.gpus:
        fits = fits and request.gpus <= (worker.total_gpus or 0)
    return fits


def _describe(request: ExecutorRequest) -> str:
    gpus = f", {request.gpus:g} GPU(s)" if request.gpus else ""
    master = (
        f" plus a master container (ApplicationMaster or cluster-mode driver) of {request.master_cores} core(s), "
        f"{format_bytes(request.master_memory)}"
        if request.has_master
        else ""
    )
    return f"{request.cores} core(s), {format_bytes(request.memory)}{gpus}{master}"


def _describe_free(workers: Sequence[WorkerCapacity]) -> str:
    cores = sum(w.free_cores for w in workers)
    memory = sum(w.free_memory for w in workers)
    return f"{cores} core(s), {format_bytes(memory)} on {len(workers)} worker(s)"


@dataclass(frozen=True)
class ResourceBounds:
    """Minimum and maximum total resources for a pipeline's cluster (0 / None: no bound)."""

    min_slots: int = 0
    max_slots: int | None = None
    min_cpu: float = 0
    max_cpu: float | None = None
    min_memory: int = 0
    max_memory: int | None = None


@dataclass(frozen=True)
class WorkerShape:
    slots: int
    cpu: float
    memory: int


def check_resource_stability(bounds: ResourceBounds, worker: WorkerShape) -> tuple[int, int | None]:
    """Reject minimum and maximum settings that cannot both hold for whole workers.

    Resources come in whole workers, so a minimum is met by ``ceil(min / per-worker)`` workers; if
    that many workers exceed a maximum, the cluster would oscillate (the stability check of the
    minimum-resources document). Returns ``(min_workers, max_workers)``; the check is off while
    every minimum is 0.
    """
    if worker.slots < 1 or worker.cpu <= 0 or worker.memory <= 0:
        raise ValueError(f"worker shape must have slots >= 1, cpu > 0 and memory > 0, got {worker}")
    pairs: list[tuple[str, float, float | None, float]] = [
        ("slots", bounds.min_slots, bounds.max_slots, worker.slots),
        ("cpu", bounds.min_cpu, bounds.max_cpu, worker.cpu),
        ("memory", bounds.min_memory, bounds.max_memory, worker.memory),
    ]
    for name, low, high, _ in pairs:
        if low < 0 or (high is not None and high < 0):
            raise ValueError(f"min/max {name} must be >= 0, got min {low}, max {high}")
        if high is not None and low > high:
            raise ValueError(f"min {name} ({_show(name, low)}) is above max {name} ({_show(name, high)})")
    needs = {name: math.ceil(low / per) for name, low, _, per in pairs}
    allows = {name: math.floor(high / per) for name, _, high, per in pairs if high is not None}
    min_workers = max(needs.values())
    max_workers = min(allows.values()) if allows else None
    if min_workers and max_workers is not None and min_workers > max_workers:
        need = next(p for p in pairs if needs[p[0]] == min_workers)
        cap = next(p for p in pairs if allows.get(p[0]) == max_workers)
        raise ValueError(
            f"unstable minimum/maximum resources: min {need[0]} {_show(need[0], need[1])} needs "
            f"{min_workers} worker(s) of {worker.slots} slot(s), {worker.cpu:g} cpu, {format_bytes(worker.memory)}, "
            f"which is {_show(cap[0], min_workers * cap[3])} {cap[0]}, above max {cap[0]} "
            f"{_show(cap[0], cap[2] or 0)}; lower the minimum or raise the maximum"
        )
    return min_workers, max_workers


def _show(name: str, value: float) -> str:
    return format_bytes(value) if name == "memory" else f"{value:g}"


def minimum_slots(stage_minimums: Mapping[str, int], min_slots: int | None, planned_slots: int) -> int:
    """The fewest slots a region may run with: its stages' minimum parallelism and the connection's min_slots."""
    return max(1, min(planned_slots, max([*stage_minimums.values(), min_slots or 0])))
