"""Warm or cold: does a region run in the warm pool's executors, or need an application of its own?

A warm pool (a long-lived Spark Connect server, FLIP-138's minimum resources kept ready) has executors
of one shape, fixed when it started. Per-stage settings (shuffle partitions, split size, adaptive
execution) change per session; the executor shape, the memory model and static Spark settings do not.
So a region runs warm when every slot it asks for fits a slot of the pool, else cold (a fresh
application sized for it). Pure Python.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_provider_finegrained.planning.cluster_profile import RESERVED_MEMORY, SPARK_DEFAULT_MEMORY_FRACTION
from airflow_provider_finegrained.planning.sizing import RegionSizing
from airflow_provider_finegrained.planning.units import format_bytes

# What a running session can still change; anything else is fixed when the application starts.
SESSION_CONF_PREFIXES = ("spark.sql.",)


@dataclass(frozen=True)
class PoolShape:
    """The executors of a warm pool. ``local``: one JVM whose threads are the slots."""

    executor_cores: int
    executor_memory: int
    max_executors: int = 1
    memory_fraction: float = SPARK_DEFAULT_MEMORY_FRACTION
    gpus_per_executor: float = 0
    off_heap_memory: int = 0
    local: bool = False

    @property
    def slots(self) -> int:
        return self.executor_cores * self.max_executors

    @property
    def slot_memory(self) -> float:
        """Usable heap of one slot (Spark reserves 300 MiB per JVM)."""
        return (self.executor_memory - RESERVED_MEMORY) / self.executor_cores

    def describe(self) -> str:
        where = "local JVM" if self.local else f"up to {self.max_executors} executor(s)"
        return (
            f"{where} of {self.executor_cores} core(s), {format_bytes(self.executor_memory)}, "
            f"memory fraction {self.memory_fraction:.2f}"
        )


@dataclass(frozen=True)
class WarmFit:
    """The decision and its reason, as the decision trace shows it."""

    warm: bool
    reason: str


def decide_warm_fit(
    sizing: RegionSizing,
    pool: PoolShape | None,
    *,
    cold_stages: Sequence[str] = (),
    static_conf: Mapping[str, Sequence[str]] | None = None,
) -> WarmFit:
    """Whether a region sized as ``sizing`` runs in ``pool``.

    ``cold_stages``: stages that ask for an application of their own (``warm=False``).
    ``static_conf``: per stage, the Spark settings it sets that a running application cannot change.
    ``pool`` None: an existing server whose executor shape is unknown; the region is trusted to fit.
    """
    if cold_stages:
        return WarmFit(False, f"stage(s) {', '.join(cold_stages)} ask for an application of their own (warm=False)")
    fixed = {stage: sorted(keys) for stage, keys in (static_conf or {}).items() if keys}
    if fixed:
        listed = "; ".join(f"{stage} sets {', '.join(keys)}" for stage, keys in sorted(fixed.items()))
        return WarmFit(False, f"{listed}: settings a running application cannot change")
    if pool is None:
        return WarmFit(True, "the connection names an existing Spark Connect server (executor shape not checked)")
    problems = _misfits(sizing, pool)
    if problems:
        return WarmFit(False, "; ".join(problems) + f"; the pool runs {pool.describe()}")
    waves = -(-sizing.slots // pool.slots) if sizing.slots > pool.slots else 1
    note = f" (its {sizing.slots} slots run in {waves} waves on the pool's {pool.slots})" if waves > 1 else ""
    return WarmFit(True, f"every slot fits the pool's executors: {pool.describe()}{note}")


def _misfits(sizing: RegionSizing, pool: PoolShape) -> list[str]:
    problems = []
    if sizing.task_cpus != 1:
        problems.append(f"each task needs {sizing.task_cpus} cores (the pool's tasks take 1)")
    if sizing.executor_gpus > pool.gpus_per_executor:
        problems.append(f"executors need {sizing.executor_gpus:g} GPU(s), the pool's have {pool.gpus_per_executor:g}")
    if sizing.off_heap_memory > pool.off_heap_memory:
        problems.append(f"executors need {format_bytes(sizing.off_heap_memory)} off-heap, the pool's have none")
    slots_per_executor = max(1, sizing.executor_cores // sizing.task_cpus)
    heap = (sizing.executor_memory - RESERVED_MEMORY) / slots_per_executor
    if heap > pool.slot_memory:
        problems.append(
            f"a slot needs {format_bytes(int(heap))} of heap, "
            f"the pool's slots have {format_bytes(int(pool.slot_memory))}"
        )
    managed, pool_managed = heap * sizing.memory_fraction, pool.slot_memory * pool.memory_fraction
    if managed > pool_managed and heap <= pool.slot_memory:
        problems.append(
            f"a slot needs {format_bytes(int(managed))} of Spark memory (fraction {sizing.memory_fraction:.2f}), "
            f"the pool's slots have {format_bytes(int(pool_managed))}"
        )
    return problems


def static_settings(conf: Mapping[str, object]) -> list[str]:
    """The keys of ``conf`` that only a fresh application takes."""
    return sorted(k for k in conf if not k.startswith(SESSION_CONF_PREFIXES))
