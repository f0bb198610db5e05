"""What one Spark application of a region may use, and Spark's memory model constants sizing counts with."""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_finegrained.planning.units import parse_bytes

MiB = 2**20
RESERVED_MEMORY = 300 * MiB
"""Spark's reserved system memory per JVM, outside ``spark.memory.fraction``."""
SPARK_DEFAULT_MEMORY_FRACTION = 0.6


@dataclass(frozen=True)
class ClusterProfile:
    """What one application may use, and the executor shape for stages without a ResourceSpec.

    ``local`` means Spark local mode: one JVM (the driver) whose threads are the executors, so the
    executor memory becomes ``spark.driver.memory`` and the cores are ``total_cores``.
    """

    total_cores: int
    total_memory: int
    executor_cores: int = 2
    executor_memory: int = 2 * 2**30
    gpus_per_executor: float = 0
    memory_overhead_factor: float = 0.10
    min_memory_overhead: int = 384 * MiB
    memory_expansion: float = 3.0
    """How much larger data is in memory than its bytes on disk (parquet is compressed)."""
    local: bool = False
    gpu_discovery_script: str | None = None
    """``spark.executor.resource.gpu.discoveryScript`` for applications that ask for GPUs (the connection's
    ``gpu_discovery_script``); None: none set here (a ``spark_conf`` may give it)."""

    def __post_init__(self) -> None:
        for name in ("total_memory", "executor_memory", "min_memory_overhead"):
            object.__setattr__(self, name, parse_bytes(getattr(self, name), what=f"cluster {name}"))
        for name in ("total_cores", "executor_cores"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"cluster {name} must be an integer >= 1, got {value!r}")
        if self.executor_memory <= RESERVED_MEMORY:
            raise ValueError(
                f"cluster executor_memory must exceed Spark's reserved {RESERVED_MEMORY // MiB} MiB, "
                f"got {self.executor_memory // MiB} MiB"
            )
        if self.memory_overhead_factor < 0 or self.memory_expansion <= 0 or self.gpus_per_executor < 0:
            raise ValueError("cluster memory_overhead_factor and gpus_per_executor must be >= 0, memory_expansion > 0")
