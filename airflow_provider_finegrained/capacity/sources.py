"""What a cluster's free capacity is, whichever cluster manager reports it, and a declared capacity.

Each source becomes a :class:`ClusterCapacity`: per-worker free resources for ``decide_capacity``, plus the
names of applications the cluster already counts as using resources (so a ledger does not count them twice).
Reading a cluster manager's answers is its launcher package's business (``launchers.standalone.capacity``,
``launchers.yarn.capacity``), which builds on the types and JSON helpers here; this module imports no
launcher, so the launchers may import it. Neither Airflow nor Spark is imported.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_finegrained.planning.capacity import MasterLimit, WorkerCapacity
from airflow_provider_finegrained.planning.units import format_bytes

MiB = 2**20


class CapacityUnavailable(Exception):
    """The cluster's free capacity could not be read (no master alive, no answer, or a malformed answer)."""


@dataclass(frozen=True)
class ClusterCapacity:
    """Free resources per worker, where they were read, and the applications already counted as using them."""

    workers: tuple[WorkerCapacity, ...]
    source: str
    """Human text naming where the numbers came from, e.g. ``standalone master http://host:8080/json/``."""
    active_apps: frozenset[str] = frozenset()
    """Names of applications whose executors the cluster already counts as used."""
    memory_step: int = 0
    """Bytes a container's memory is rounded up to a multiple of (YARN's minimum allocation); 0: none."""
    master_limit: MasterLimit | None = None
    """What the application's queue lets ApplicationMasters hold (YARN's Capacity Scheduler); None: no limit read."""

    @property
    def total_free_cores(self) -> int:
        return sum(w.free_cores for w in self.workers)

    @property
    def total_free_memory(self) -> int:
        return sum(w.free_memory for w in self.workers)

    @property
    def total_free_gpus(self) -> float:
        return sum(w.free_gpus for w in self.workers)

    def describe(self) -> str:
        """One line for logs and task messages: totals free, the roomiest worker, the source."""
        gpus = f", {self.total_free_gpus:g} GPU(s)" if any(w.free_gpus or w.total_gpus for w in self.workers) else ""
        text = (
            f"{self.total_free_cores} core(s), {format_bytes(self.total_free_memory)}{gpus} free "
            f"on {len(self.workers)} worker(s)"
        )
        if len(self.workers) > 1:
            roomiest = max(self.workers, key=lambda w: (w.free_cores, w.free_memory))
            text += f" (roomiest: {roomiest.free_cores} core(s), {format_bytes(roomiest.free_memory)})"
        text += f", from {self.source}"
        if self.active_apps:
            text += f"; running: {', '.join(sorted(self.active_apps))}"
        if (limit := self.master_limit) is not None:
            text += (
                f"; queue {limit.queue}'s ApplicationMasters hold {format_bytes(limit.used)} "
                f"of {format_bytes(limit.limit)}"
            )
        return text


def declared_capacity(total_cores: int, total_memory: int, source: str, total_gpus: float = 0) -> ClusterCapacity:
    """One pseudo-worker holding a declared total, all free (local mode, Kubernetes: the connection says)."""
    if total_cores < 1 or total_memory < 1 or total_gpus < 0:
        raise ValueError(
            f"declared capacity needs total_cores >= 1, total_memory >= 1 and total_gpus >= 0, "
            f"got {total_cores}, {total_memory}, {total_gpus}"
        )
    worker = WorkerCapacity(total_cores, total_memory, total_gpus, total_cores, total_memory, total_gpus)
    return ClusterCapacity((worker,), source)


def as_list(value: Any) -> list[Any]:
    """JSON lists as they are; a lone object as a list of one (some JAXB JSON writers collapse one-item lists)."""
    if isinstance(value, list):
        return value
    return [] if value is None else [value]


def json_float(doc: Mapping[str, Any], key: str, where: str) -> float:
    """``doc[key]`` as a finite number (a number or a numeric string); CapacityUnavailable naming `where` if not."""
    value = doc.get(key)
    # Some RM front ends (the YARN Router) write numbers as strings.
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise CapacityUnavailable(f"{where}: {key!r} is missing or not a number: {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise CapacityUnavailable(f"{where}: {key!r} is not a number: {value!r}") from None
    if not math.isfinite(number):
        raise CapacityUnavailable(f"{where}: {key!r} is not finite: {value!r}")
    return number


def json_int(doc: Any, key: str, where: str) -> int:
    """``doc[key]`` as a whole number (truncated); CapacityUnavailable naming `where` if `doc` or the value is wrong."""
    if not isinstance(doc, Mapping):
        raise CapacityUnavailable(f"{where}: expected an object holding {key!r}, got {doc!r}")
    return int(json_float(doc, key, where))
