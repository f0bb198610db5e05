"""Turn Spark's executor settings into the :class:`ExecutorRequest` that ``decide_capacity`` compares with a cluster."""

from __future__ import annotations

from collections.abc import Mapping

from airflow_provider_finegrained.planning.capacity import ExecutorRequest
from airflow_provider_finegrained.planning.units import parse_bytes

MiB = 2**20
AM_MEMORY_OVERHEAD_FACTOR = 0.10
"""Spark's fixed factor for a client-mode ApplicationMaster's overhead (``YarnSparkHadoopUtil``)."""
MIN_MEMORY_OVERHEAD_MIB = 384


def executor_request(
    executors: int,
    executor_cores: int,
    task_cpus: int,
    executor_memory: int,
    memory_overhead: int,
    off_heap_memory: int,
    executor_gpus: float,
    parallelism: int,
    min_parallelism: int,
) -> ExecutorRequest:
    """A cluster-mode request: each executor holds heap + overhead + off-heap and runs cores // task_cpus tasks."""
    _check_common(executor_cores, task_cpus, executor_memory, memory_overhead, off_heap_memory, executor_gpus)
    _check_parallelism(parallelism, min_parallelism)
    if executors < 1:
        raise ValueError(f"executors must be >= 1, got {executors}")
    return ExecutorRequest(
        executors=executors,
        cores=executor_cores,
        memory=executor_memory + memory_overhead + off_heap_memory,
        parallelism=parallelism,
        min_parallelism=min_parallelism,
        slots_per_executor=executor_cores // task_cpus,
        gpus=executor_gpus,
    )


def local_request(
    threads: int,
    task_cpus: int,
    driver_memory: int,
    driver_memory_overhead: int,
    off_heap_memory: int,
    parallelism: int,
    min_parallelism: int,
    gpus: float = 0,
) -> ExecutorRequest:
    """Spark local mode: one JVM (the driver) whose threads are the task slots, so a single executor-sized block."""
    _check_common(threads, task_cpus, driver_memory, driver_memory_overhead, off_heap_memory, gpus)
    _check_parallelism(parallelism, min_parallelism)
    return ExecutorRequest(
        executors=1,
        cores=threads,
        memory=driver_memory + driver_memory_overhead + off_heap_memory,
        parallelism=parallelism,
        min_parallelism=min_parallelism,
        slots_per_executor=threads // task_cpus,
        gpus=gpus,
    )


def application_master(conf: Mapping[str, str], cluster_mode: bool) -> tuple[int, int]:
    """The cores and bytes of a Spark application's YARN ApplicationMaster, as Spark 4's YARN client asks for it.

    Client mode: Spark's executor launcher, ``spark.yarn.am.cores`` (1) and ``spark.yarn.am.memory`` (512m) plus
    ``spark.yarn.am.memoryOverhead``, else 10% of that heap, at least 384 MiB. Cluster mode: the driver,
    ``spark.driver.cores`` (1) and ``spark.driver.memory`` (1g) plus ``spark.driver.memoryOverhead``, else
    ``spark.driver.memoryOverheadFactor`` (0.10) of the heap, at least ``spark.driver.minMemoryOverhead`` (384m).
    Spark counts in whole MiB (a bare number is MiB); YARN then rounds the container up to its minimum
    allocation (:meth:`ExecutorRequest.in_containers_of`).
    """
    if cluster_mode:
        prefix, heap_default = "spark.driver.", "1g"
        factor = float(conf.get("spark.driver.memoryOverheadFactor", AM_MEMORY_OVERHEAD_FACTOR))
        least = _mib(conf.get("spark.driver.minMemoryOverhead", f"{MIN_MEMORY_OVERHEAD_MIB}m"), "minMemoryOverhead")
    else:
        prefix, heap_default = "spark.yarn.am.", "512m"
        factor, least = AM_MEMORY_OVERHEAD_FACTOR, MIN_MEMORY_OVERHEAD_MIB
    heap = _mib(conf.get(f"{prefix}memory", heap_default), f"{prefix}memory")
    overhead = conf.get(f"{prefix}memoryOverhead")
    extra = _mib(overhead, f"{prefix}memoryOverhead") if overhead else max(int(factor * heap), least)
    cores = conf.get(f"{prefix}cores", "1")
    if not cores.strip().isdigit() or int(cores) < 1:
        raise ValueError(f"{prefix}cores: {cores!r}; allowed: a whole number of at least 1")
    return int(cores), (heap + extra) * MiB


def _mib(value: str, what: str) -> int:
    """A Spark memory setting in whole MiB, as Spark reads it: a bare number is MiB, a size is truncated to MiB."""
    text = value.strip()
    return int(text) if text.isdigit() else parse_bytes(text, what=what) // MiB


def _check_common(cores: int, task_cpus: int, memory: int, overhead: int, off_heap: int, gpus: float) -> None:
    if task_cpus < 1:
        raise ValueError(f"task cpus must be >= 1, got {task_cpus}")
    # Spark refuses the same at start-up: an executor with fewer cores than a task needs runs nothing.
    if cores < task_cpus:
        raise ValueError(f"cores ({cores}) must be >= task cpus ({task_cpus}), or no task can run")
    if memory < 1:
        raise ValueError(f"memory must be >= 1 byte, got {memory}")
    if overhead < 0 or off_heap < 0 or gpus < 0:
        raise ValueError(f"overhead, off-heap memory and GPUs must be >= 0, got {overhead}, {off_heap}, {gpus}")


def _check_parallelism(parallelism: int, min_parallelism: int) -> None:
    if min_parallelism < 1 or parallelism < min_parallelism:
        raise ValueError(f"need 1 <= min_parallelism <= parallelism, got {min_parallelism} and {parallelism}")
