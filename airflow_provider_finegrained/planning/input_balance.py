"""The scan settings decided for one stage and the task spread Spark's packing is predicted to give."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from airflow_provider_finegrained.planning.scan_packing import TASK_COST_BYTES, median_bytes, scan_cost, spread


@dataclass(frozen=True)
class InputBalance:
    """The scan settings of one stage and the task spread they give, as Spark packs the files."""

    max_partition_bytes: int
    open_cost_bytes: int
    cores: int
    """Spark's default ``minPartitionNum`` (the application's cores), which the prediction assumes."""
    row_group_bytes: int
    """The row-group size the prediction assumes for the scanned files (the producers' write option)."""
    file_count: int
    file_bytes: tuple[int, int, int]
    """(smallest, median, largest) scanned file."""
    task_bytes: tuple[int, ...]
    """Predicted data bytes of every scan task, in Spark's order."""
    default_task_bytes: tuple[int, ...]
    """Predicted task bytes with Spark's default scan settings and parquet's default row groups."""
    why: str
    slots: int = 1
    """The task slots the prediction spreads the tasks over (waves and cost)."""
    decided_task_bytes: tuple[int, ...] = ()
    """Predicted task bytes at the decided parallelism's split (bytes / parallelism), the finest tried."""
    task_cost_bytes: int = TASK_COST_BYTES

    @property
    def cost(self) -> int:
        """Predicted stage cost in bytes: the busiest slot's task bytes plus a fixed cost per task."""
        return scan_cost(self.task_bytes, self.slots, self.task_cost_bytes)

    @property
    def spread(self) -> float:
        """Predicted max/median of the tasks' bytes (1.0 for no or one task)."""
        return spread(self.task_bytes)

    @property
    def total_bytes(self) -> int:
        """The scanned bytes (every task's data together)."""
        return sum(self.task_bytes)

    def session_conf(self) -> dict[str, str]:
        """The scan settings to set in the stage's session."""
        return {
            "spark.sql.files.maxPartitionBytes": str(self.max_partition_bytes),
            "spark.sql.files.openCostInBytes": str(self.open_cost_bytes),
        }

    def to_dict(self) -> dict[str, Any]:
        """The record for the stage's trace (``StageTrace.input_balance``)."""
        ordered = sorted(self.task_bytes)
        return {
            "settings": self.session_conf(),
            "row_group_bytes": self.row_group_bytes,
            "files": self.file_count,
            "file_bytes": {"min": self.file_bytes[0], "median": self.file_bytes[1], "max": self.file_bytes[2]},
            "predicted_tasks": len(self.task_bytes),
            "predicted_task_bytes": {
                "min": ordered[0] if ordered else 0,
                "median": median_bytes(ordered),
                "max": ordered[-1] if ordered else 0,
            },
            "predicted_max_over_median": round(self.spread, 2),
            "predicted_waves": math.ceil(len(self.task_bytes) / self.slots),
            "slots": self.slots,
            "cost": {
                "task_cost_bytes": self.task_cost_bytes,
                "predicted": self.cost,
                "at_decided_parallelism": {
                    "tasks": len(self.decided_task_bytes),
                    "max_over_median": round(spread(self.decided_task_bytes), 2),
                    "cost": scan_cost(self.decided_task_bytes, self.slots, self.task_cost_bytes),
                },
                "spark_defaults": scan_cost(self.default_task_bytes, self.slots, self.task_cost_bytes),
            },
            "spark_default_tasks": len(self.default_task_bytes),
            "spark_default_max_over_median": round(spread(self.default_task_bytes), 2),
            "why": self.why,
        }
