"""The one executor shape of a region's Spark application, from its stages' ResourceSpecs (FLIP-53's slots)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from airflow_provider_finegrained.planning.cluster_profile import (
    RESERVED_MEMORY,
    SPARK_DEFAULT_MEMORY_FRACTION,
    ClusterProfile,
)
from airflow_provider_finegrained.planning.stage_sizing import StageDemand


@dataclass(frozen=True)
class ExecutorShape:
    """An executor of the region: its cores, memory model, off-heap and GPUs, and the cores a task takes."""

    task_cpus: int
    executor_cores: int
    executor_memory: int
    memory_fraction: float
    off_heap: int
    executor_gpus: float
    task_gpus: float
    local: bool


def executor_shape(stages: Sequence[StageDemand], profile: ClusterProfile) -> ExecutorShape:
    """The profile's executor without ResourceSpecs; with them, executors of whole slots that each hold one
    task of every stage."""
    specs = [s.resources for s in stages if s.resources is not None]
    if not specs:
        cores = profile.total_cores if profile.local else min(profile.executor_cores, profile.total_cores)
        return ExecutorShape(1, cores, profile.executor_memory, SPARK_DEFAULT_MEMORY_FRACTION, 0, 0, 0, profile.local)
    # FLIP-53: a slot of a region serves one parallel instance of every stage, so it asks for the
    # sum of the stages' specs. Spark's unified memory plays the part of Flink's managed memory.
    slot = specs[0]
    for spec in specs[1:]:
        slot = slot + spec
    task_cpus = max(1, math.ceil(slot.cpu_cores))
    if task_cpus > profile.total_cores:
        raise ValueError(
            f"stages {[s.stage for s in stages]} together need {task_cpus} cores per slot, "
            f"but the cluster offers {profile.total_cores}"
        )
    per_executor = profile.total_cores if profile.local else max(profile.executor_cores, task_cpus)
    slots_per_executor = max(1, per_executor // task_cpus)
    on_heap = slot.heap_memory + slot.managed_memory
    fraction = SPARK_DEFAULT_MEMORY_FRACTION
    if slot.managed_memory:
        fraction = min(0.9, max(0.1, slot.managed_memory / on_heap))
    executor_gpus, task_gpus = gpu_amounts(slot.gpus, slots_per_executor)
    return ExecutorShape(
        task_cpus=task_cpus,
        executor_cores=slots_per_executor * task_cpus,
        executor_memory=slots_per_executor * on_heap + RESERVED_MEMORY,
        memory_fraction=fraction,
        off_heap=slots_per_executor * slot.off_heap_memory,
        executor_gpus=executor_gpus,
        task_gpus=task_gpus,
        local=profile.local,
    )


def gpu_amounts(slot_gpus: float, slots_per_executor: int) -> tuple[int, float]:
    """Spark's GPU settings for slots that each need ``slot_gpus``: (whole GPUs per executor, GPUs per task).

    Spark wants a whole number per executor, and per task a share of one GPU (at most 1: ``floor(1 / amount)``
    tasks use each GPU) or a whole number. A share stays as declared and the executor gets enough whole GPUs
    for its slots (0.5 on 2 slots: 1 GPU); above 1 a task's amount is rounded up to whole GPUs.
    """
    if slot_gpus <= 0:
        return 0, 0.0
    if slot_gpus <= 1:
        tasks_per_gpu = max(1, math.floor(1 / slot_gpus))
        return math.ceil(slots_per_executor / tasks_per_gpu), float(slot_gpus)
    whole = math.ceil(slot_gpus)
    return slots_per_executor * whole, float(whole)
