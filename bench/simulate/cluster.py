"""The simulated cluster: identical nodes cut into executors of one shape, granted first come, first served.

Every policy asks for executors of the same shape, so a node holds a whole number of them and the
cluster is a pool of executor places: an executor fits a node exactly when a place is free. Requests
wait in arrival order and are granted as places free up, in part if only part is free (what a
standalone master does for a waiting application).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from airflow_provider_finegrained.planning import RESERVED_MEMORY, SPARK_DEFAULT_MEMORY_FRACTION, parse_bytes

MiB = 2**20


@dataclass(frozen=True)
class ClusterSpec:
    """``nodes`` workers of ``node_cores`` and ``node_memory``; executors of one shape."""

    nodes: int
    node_cores: int
    node_memory: int
    executor_cores: int
    executor_memory: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "node_memory", parse_bytes(self.node_memory, what="cluster node_memory"))
        object.__setattr__(self, "executor_memory", parse_bytes(self.executor_memory, what="cluster executor_memory"))
        for name in ("nodes", "node_cores", "executor_cores"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"cluster {name} must be an integer >= 1, got {value!r}")
        if self.executor_memory <= RESERVED_MEMORY:
            raise ValueError(
                f"cluster executor_memory must exceed Spark's reserved {RESERVED_MEMORY // MiB} MiB, "
                f"got {self.executor_memory // MiB} MiB"
            )
        if self.executors_per_node < 1:
            raise ValueError(
                f"an executor of {self.executor_cores} cores and {self.executor_footprint // MiB} MiB "
                f"(with overhead) does not fit a node of {self.node_cores} cores and {self.node_memory // MiB} MiB"
            )

    @property
    def memory_overhead(self) -> int:
        """Spark's default executor memory overhead: 10%, at least 384 MiB (as size_region computes it)."""
        return max(384 * MiB, int(0.10 * self.executor_memory))

    @property
    def executor_footprint(self) -> int:
        return self.executor_memory + self.memory_overhead

    @property
    def executors_per_node(self) -> int:
        return min(self.node_cores // self.executor_cores, self.node_memory // self.executor_footprint)

    @property
    def total_executors(self) -> int:
        return self.nodes * self.executors_per_node

    @property
    def total_cores(self) -> int:
        return self.nodes * self.node_cores

    def task_memory(self, memory_fraction: float = 1.0) -> float:
        """One task's share of execution memory with one core per task (Spark's unified memory model)."""
        usable = (self.executor_memory - RESERVED_MEMORY) * SPARK_DEFAULT_MEMORY_FRACTION
        return usable / self.executor_cores * memory_fraction


class Cluster:
    """Free executor places and the requests waiting for them, in arrival order."""

    def __init__(self, spec: ClusterSpec, grant: Callable[[object, int], None]) -> None:
        self.spec = spec
        self.free = spec.total_executors
        self._grant = grant
        self._waiting: deque[list[Any]] = deque()  # [owner, executors still wanted]; 0 once cancelled
        self._by_owner: dict[int, list[list[Any]]] = {}
        self._open = 0  # waiting entries not yet served or cancelled

    def request(self, owner: object, executors: int) -> None:
        """Ask for ``executors``; granted now as far as places are free, the rest as they free up."""
        if executors <= 0:
            return
        entry = [owner, executors]
        self._waiting.append(entry)
        self._by_owner.setdefault(id(owner), []).append(entry)
        self._open += 1
        self._serve()

    def hold(self, executors: int) -> None:
        """Take free places for an owner that will use them later (the provider's reservation ledger)."""
        if executors < 0 or executors > self.free or self._open:
            raise ValueError(f"cannot hold {executors} executor(s): {self.free} free, {self._open} request(s) waiting")
        self.free -= executors

    def cancel(self, owner: object) -> int:
        """Withdraw the owner's waiting requests; returns how many executors it no longer waits for."""
        dropped = 0
        # Cancelled entries stay in the queue with nothing wanted and are skipped when served: a
        # cancellation costs the owner's entries, not the whole queue.
        for entry in self._by_owner.pop(id(owner), ()):
            if entry[1]:
                dropped += entry[1]
                entry[1] = 0
                self._open -= 1
        return dropped

    def release(self, executors: int) -> None:
        if executors < 0 or self.free + executors > self.spec.total_executors:
            raise ValueError(f"cannot release {executors} executor(s) with {self.free} free")
        self.free += executors
        self._serve()

    @property
    def waiting(self) -> int:
        """Requests still waiting (in part or in full)."""
        return self._open

    def _serve(self) -> None:
        while self._waiting and self.free:
            head = self._waiting[0]
            owner, wanted = head[0], head[1]
            if not wanted:  # cancelled
                self._waiting.popleft()
                continue
            given = min(wanted, self.free)
            self.free -= given
            if given == wanted:
                self._waiting.popleft()
                head[1] = 0
                self._open -= 1
                entries = self._by_owner.get(id(owner))
                if entries is not None:
                    entries.remove(head)
                    if not entries:
                        del self._by_owner[id(owner)]
            else:
                head[1] = wanted - given
            self._grant(owner, given)
