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

from airflow_provider_finegrained.planning import parse_bytes
from airflow_provider_finegrained.planning.sizing import RESERVED_MEMORY, SPARK_DEFAULT_MEMORY_FRACTION

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
        self._waiting: deque[list[object]] = deque()  # [owner, executors still wanted]

    def request(self, owner: object, executors: int) -> None:
        """Ask for ``executors``; granted now as far as places are free, the rest as they free up."""
        if executors <= 0:
            return
        self._waiting.append([owner, executors])
        self._serve()

    def hold(self, executors: int) -> None:
        """Take free places for an owner that will use them later (the provider's reservation ledger)."""
        if executors < 0 or executors > self.free or self._waiting:
            raise ValueError(
                f"cannot hold {executors} executor(s): {self.free} free, {len(self._waiting)} request(s) waiting"
            )
        self.free -= executors

    def cancel(self, owner: object) -> int:
        """Withdraw the owner's waiting requests; returns how many executors it no longer waits for."""
        dropped = sum(int(w[1]) for w in self._waiting if w[0] is owner)  # type: ignore[call-overload]
        if dropped:
            self._waiting = deque(w for w in self._waiting if w[0] is not owner)
        return dropped

    def release(self, executors: int) -> None:
        if executors < 0 or self.free + executors > self.spec.total_executors:
            raise ValueError(f"cannot release {executors} executor(s) with {self.free} free")
        self.free += executors
        self._serve()

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _serve(self) -> None:
        while self._waiting and self.free:
            head = self._waiting[0]
            owner, wanted = head[0], int(head[1])  # type: ignore[call-overload]
            given = min(wanted, self.free)
            self.free -= given
            if given == wanted:
                self._waiting.popleft()
            else:
                head[1] = wanted - given
            self._grant(owner, given)
