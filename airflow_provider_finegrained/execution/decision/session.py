"""The Spark settings a decision gives: each stage's session settings and the region's application settings. Pure.

A stage's session settings are set before its function runs and restored after it (``runtime.region_loop``):
its decided shuffle partitions and scan split (a lazy producer's scan settings carried to the stage whose
jobs run its plan, ``execution.spark_reach``), AQE's (off, or on with the advisory size, skew thresholds and
the coalesce floor), then the stage's own ``spark.sql.*`` from its ``spark_conf``, which win.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from airflow_provider_finegrained.planning import ParallelismConfig
from airflow_provider_finegrained.planning.adaptive_sizes import decide_adaptive
from airflow_provider_finegrained.planning.capacity import ResourceBounds
from airflow_provider_finegrained.planning.input_balance import InputBalance
from airflow_provider_finegrained.planning.scan_splits import producer_row_group_bytes


@dataclass(frozen=True)
class DecisionSettings:
    """The settings a region's decision reads besides each stage's parallelism settings and the cluster profile."""

    adaptive_query_execution: bool = True
    """AQE on (as a correction towards the decided bytes per task) or off."""
    stage_spark_conf: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    """Each stage's own ``spark_conf`` (its ``spark.sql.*`` keys win in its session)."""
    output_format: Mapping[str, str] = field(default_factory=dict)
    """Each stage's output format (default parquet), for its writer options."""
    resource_bounds: ResourceBounds | None = None
    """The minimum and maximum resources, for the executors' lifecycle; None: no dynamic allocation set."""
    executors_from: str = "one_at_start"
    """When the executors are asked for (``one_at_start``, ``first_job`` or ``start``: ``executor_lifecycle``)."""
    jit: str = "auto"
    """The region's JVMs' compilers: ``auto`` (by the bytes per slot, ``planning.jit``), ``c1`` or ``tiered``."""

    def sql_conf(self, stage: str) -> dict[str, str]:
        """The stage's own session settings: the ``spark.sql.*`` keys of its ``spark_conf``."""
        return {k: str(v) for k, v in self.stage_spark_conf.get(stage, {}).items() if k.startswith("spark.sql.")}


def adaptive_conf(
    enabled: bool, config: ParallelismConfig, balance: InputBalance | None = None, min_partitions: int = 1
) -> dict[str, str]:
    """A stage's AQE settings: off, or on as an in-query correction towards the planned bytes per task.

    ``balance``: the stage's scanned files (``StageSizing.balance``); with skewed input the advisory size
    and skew threshold go below the bytes per task (``planning.adaptive_sizes.decide_adaptive``).
    ``min_partitions``: the fewest partitions AQE may coalesce a shuffle into (``StageSizing.coalesce_floor``,
    the memory floor), set on every stage so that no stage inherits another's in a shared session.
    """
    if not enabled:
        return {"spark.sql.adaptive.enabled": "false"}
    # The decided parallelism is an upper bound that AQE may coalesce towards the same bytes per task when
    # filters leave less data than planned; a hot key's partition is split towards that size too (Spark's
    # skew thresholds, 5x the median and 256 MiB, never fire on partitions sized at a few MiB).
    return {
        "spark.sql.adaptive.enabled": "true",
        "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
        "spark.sql.adaptive.coalescePartitions.minPartitionNum": str(max(1, min_partitions)),
        **decide_adaptive(config.avg_bytes_per_task, balance).session_conf(),
    }


def write_options(output_format: str, consumer_configs: Sequence[ParallelismConfig]) -> dict[str, str]:
    """A producer's writer options: parquet row groups small enough for its consumers' splits to cut.

    Spark gives a parquet row group to the split holding its midpoint, so a file written as one 128 MiB
    row group is read by one task however small the consumers' splits are.
    """
    if output_format != "parquet" or not consumer_configs:
        return {}
    smallest = min(c.avg_bytes_per_task for c in consumer_configs)
    return {"parquet.block.size": str(producer_row_group_bytes(smallest))}
