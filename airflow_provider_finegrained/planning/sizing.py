"""Turn a region's decisions into the Spark settings of one application and its stages.

A region is one Spark application (its slot sharing group). Its executors take one shape
(:mod:`~airflow_provider_finegrained.planning.executor_shape`); each stage keeps its own parallelism
(``spark.sql.shuffle.partitions`` and the input split size change per stage inside a session), sized by
:mod:`~airflow_provider_finegrained.planning.stage_sizing`: tasks fill the slots in even waves
(FLIP-370), and a stage's share of execution memory puts a floor under its parallelism so that one
task's data fits that share. The executors are sized for the wider of a stage's scan and shuffle sides.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from airflow_provider_finegrained.planning.cluster_profile import RESERVED_MEMORY, ClusterProfile, MiB
from airflow_provider_finegrained.planning.executor_shape import ExecutorShape, executor_shape
from airflow_provider_finegrained.planning.resources import check_specs_not_mixed
from airflow_provider_finegrained.planning.stage_sizing import (
    FlooredStage,
    StageDemand,
    StageSizing,
    floor_stage,
    size_stage,
)


@dataclass(frozen=True)
class RegionSizing:
    executor_instances: int
    executor_cores: int
    task_cpus: int
    executor_memory: int
    memory_overhead: int
    memory_fraction: float
    off_heap_memory: int
    executor_gpus: float
    """Whole GPUs per executor (Spark refuses a fraction there)."""
    task_gpus: float
    """GPUs per task: at most 1 (a share of one GPU: ``floor(1 / amount)`` tasks use each) or a whole number."""
    local: bool
    stages: dict[str, StageSizing] = field(default_factory=dict)
    gpu_discovery_script: str | None = None
    """The executors' GPU discovery script, set with the GPU amounts (Spark refuses a script without an amount)."""

    @property
    def slots(self) -> int:
        return self.executor_instances * (self.executor_cores // self.task_cpus)

    def application_conf(self) -> dict[str, str]:
        """Settings fixed when the application starts (executor shape and memory model)."""
        conf = {"spark.memory.fraction": f"{self.memory_fraction:.2f}"}
        if self.local:
            conf["spark.driver.memory"] = f"{self.executor_memory // MiB}m"
        else:
            conf.update(
                {
                    "spark.executor.instances": str(self.executor_instances),
                    "spark.executor.cores": str(self.executor_cores),
                    "spark.executor.memory": f"{self.executor_memory // MiB}m",
                    "spark.executor.memoryOverhead": f"{self.memory_overhead // MiB}m",
                    # Standalone ignores executor.instances; cores.max caps the application instead.
                    "spark.cores.max": str(self.executor_instances * self.executor_cores),
                    "spark.task.cpus": str(self.task_cpus),
                }
            )
        if self.off_heap_memory:
            conf["spark.memory.offHeap.enabled"] = "true"
            conf["spark.memory.offHeap.size"] = f"{math.ceil(self.off_heap_memory / MiB)}m"
        if self.executor_gpus:
            conf["spark.executor.resource.gpu.amount"] = _number(self.executor_gpus)
            conf["spark.task.resource.gpu.amount"] = _number(self.task_gpus)
            if self.gpu_discovery_script and not self.local:
                # An executor finds its GPUs' addresses with it (YARN and Kubernetes tell it none).
                conf["spark.executor.resource.gpu.discoveryScript"] = self.gpu_discovery_script
        return conf


def size_region(stages: Sequence[StageDemand], profile: ClusterProfile) -> RegionSizing:
    """Size one region's Spark application and adjust each stage's parallelism to even waves."""
    if not stages:
        raise ValueError("a region needs at least one stage to size")
    check_specs_not_mixed({s.stage: s.resources for s in stages})
    shape = executor_shape(stages, profile)
    task_cpus, slots_per_executor = shape.task_cpus, shape.executor_cores // shape.task_cpus
    per_task_memory = (shape.executor_memory - RESERVED_MEMORY) * shape.memory_fraction / slots_per_executor
    floored = {stage.stage: floor_stage(stage, per_task_memory, profile.memory_expansion) for stage in stages}
    overhead = max(profile.min_memory_overhead, int(profile.memory_overhead_factor * shape.executor_memory))
    if shape.local:
        executors, max_slots = 1, profile.total_cores // task_cpus
    else:
        executors = _executor_count(shape, profile, overhead, floored.values())
        max_slots = executors * slots_per_executor
    slots = max(1, max_slots)
    result = {
        stage.stage: size_stage(stage, floored[stage.stage], slots, task_cpus, executors, per_task_memory)
        for stage in stages
    }
    return RegionSizing(
        executor_instances=executors,
        executor_cores=shape.executor_cores,
        task_cpus=task_cpus,
        executor_memory=shape.executor_memory,
        memory_overhead=overhead,
        memory_fraction=shape.memory_fraction,
        off_heap_memory=shape.off_heap,
        executor_gpus=shape.executor_gpus,
        task_gpus=shape.task_gpus,
        local=shape.local,
        stages=result,
        gpu_discovery_script=profile.gpu_discovery_script if shape.executor_gpus else None,
    )


def _executor_count(
    shape: ExecutorShape, profile: ClusterProfile, overhead: int, floored: Iterable[FlooredStage]
) -> int:
    """The executors a cluster (not local) application asks for: enough for its widest stage, as many as fit."""
    slots_per_executor = shape.executor_cores // shape.task_cpus
    by_cores = profile.total_cores // shape.executor_cores
    by_memory = profile.total_memory // (shape.executor_memory + overhead + shape.off_heap)
    if shape.executor_gpus and profile.gpus_per_executor:
        by_cores = min(by_cores, int(profile.gpus_per_executor // shape.executor_gpus) or by_cores)
    fitting = max(1, min(by_cores, by_memory))
    # Executors for the wider side: a stage that scans many splits but shuffles into few
    # partitions (or the reverse) still has that many tasks at once in one of its Spark stages.
    widest = max(max(s.parallelism, s.scan) for s in floored)
    return max(1, min(fitting, math.ceil(widest / slots_per_executor)))


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
