"""AQE's sizes of a stage (advisory partition size, skew-join threshold) from its measured scanned files.

With AQE on, Spark coalesces a stage's shuffle partitions towards the advisory size and splits a skewed
one (``OptimizeSkewedJoin``). Its defaults (factor 5 and 256 MiB) never split a partition of a stage
sized at a few MiB per task; :func:`decide_adaptive` scales both to the stage's bytes per task, and
below it when the scanned files show a hot key. Pure: no Spark import.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from airflow_provider_finegrained.planning.balance import SKEWED_INPUT_SPREAD
from airflow_provider_finegrained.planning.input_balance import InputBalance
from airflow_provider_finegrained.planning.units import format_mib

SKEW_FACTOR = 2
"""AQE splits a shuffle partition above this multiple of the median (and above the advisory size)."""
MIN_ADVISORY_SHARE = 4
"""A skewed stage's advisory size stays at least 1/4 of its bytes per task (AQE makes at most ~4x the tasks)."""


def skew_join_conf(advisory_bytes: int) -> dict[str, str]:
    """AQE's skew-join settings scaled to the stage's bytes per task, for a session with AQE on.

    Spark's defaults (factor 5 and 256 MiB) never split a partition below 256 MiB, so a hot key in a
    stage sized at a few MiB per task stays one straggler. A partition above twice the median and above
    the advisory size is split into pieces of about the advisory size.
    """
    if advisory_bytes < 1:
        raise ValueError(f"advisory partition bytes must be >= 1, got {advisory_bytes}")
    return {
        "spark.sql.adaptive.skewJoin.enabled": "true",
        "spark.sql.adaptive.skewJoin.skewedPartitionFactor": str(SKEW_FACTOR),
        "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": str(advisory_bytes),
    }


@dataclass(frozen=True)
class AdaptiveSizes:
    """A stage's AQE sizes (advisory partition size, skew-join threshold), decided from its measured input."""

    advisory_bytes: int
    skew_threshold_bytes: int
    skewed: bool
    """Whether the stage's scanned input was measured as skewed (largest file above 2x the median)."""
    why: str

    def session_conf(self) -> dict[str, str]:
        """The AQE size settings of the stage's session (with AQE on)."""
        return {
            "spark.sql.adaptive.advisoryPartitionSizeInBytes": str(self.advisory_bytes),
            **skew_join_conf(self.skew_threshold_bytes),
        }

    def to_dict(self) -> dict[str, Any]:
        """The record for the stage's trace (``input_balance["adaptive"]``)."""
        return {"settings": self.session_conf(), "skewed_input": self.skewed, "why": self.why}


def decide_adaptive(avg_bytes_per_task: int, balance: InputBalance | None) -> AdaptiveSizes:
    """The advisory size and skew-join threshold of a stage from its bytes per task and scanned files.

    Unskewed input (or no files scanned): both are ``avg_bytes_per_task``, the planned bytes of a task.
    Skewed input (largest file above 2x the median): a producer that partitioned its output by key
    writes a hot key's rows into one file, so the largest file's share ``h`` of the scanned bytes
    estimates the hot key's share. Spark's ``OptimizeSkewedJoin`` cuts a skewed partition into pieces of
    ``targetSize = max(advisory, mean of the non-skewed partitions)``; of ``P = bytes / avg`` partitions
    the non-skewed ones hold ``avg x (1 - h)`` each. An advisory of ``avg x (1 - h)`` (at least avg/4)
    makes the pieces that size too, and keeps the non-skewed partitions as they are (each is already
    at the advisory size, so coalescing merges none). At ``avg`` the pieces were up to ``1 / (1 - h)``
    times the other tasks.
    """
    if isinstance(avg_bytes_per_task, bool) or not isinstance(avg_bytes_per_task, int) or avg_bytes_per_task < 1:
        raise ValueError(f"avg_bytes_per_task must be an integer >= 1, got {avg_bytes_per_task!r}")
    if balance is None or balance.total_bytes <= 0:
        return AdaptiveSizes(
            avg_bytes_per_task, avg_bytes_per_task, False, "no files scanned: advisory size = avg_bytes_per_task"
        )
    _, median, largest = balance.file_bytes
    ratio = largest / median if median > 0 else math.inf
    if ratio <= SKEWED_INPUT_SPREAD:
        return AdaptiveSizes(
            avg_bytes_per_task,
            avg_bytes_per_task,
            False,
            f"input not skewed (largest file {ratio:.1f}x the median): advisory size = avg_bytes_per_task",
        )
    share = largest / balance.total_bytes
    advisory = max(1, avg_bytes_per_task // MIN_ADVISORY_SHARE, round(avg_bytes_per_task * (1 - share)))
    advisory = min(advisory, avg_bytes_per_task)
    return AdaptiveSizes(
        advisory,
        advisory,
        True,
        f"input skewed: largest file {ratio:.1f}x the median, {share:.0%} of the scanned bytes (a hot key's "
        f"share); AQE cuts a skewed partition into pieces of max(advisory, mean of the others) and the others "
        f"hold about avg x (1 - {share:.2f}): advisory and skew threshold {format_mib(advisory)} "
        f"(avg_bytes_per_task {format_mib(avg_bytes_per_task)}, at least a quarter of it)",
    )
