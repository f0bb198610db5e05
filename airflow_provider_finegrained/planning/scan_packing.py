"""Spark's packing of a scan's files into tasks, replayed from their measured sizes, and its predicted cost.

Spark packs a scan's files into tasks itself (``FilePartition`` in Spark's sql/core): it splits each
file into chunks of ``maxSplitBytes = min(maxPartitionBytes, max(openCostInBytes, bytesPerCore))``
(``bytesPerCore`` = every file's bytes plus one open cost each, over ``minPartitionNum``), sorts the
chunks by size, largest first, and fills tasks next-fit, counting ``openCostInBytes`` for every chunk.
A parquet chunk reads the row groups whose midpoint lies in it, so a file written as one large row
group is read by one task however it is split.

:func:`simulate_scan_tasks` replays that packing; :func:`scan_cost` predicts the stage's time from the
tasks it gives. Pure: no Spark import.
"""

from __future__ import annotations

import heapq
import math
import statistics
from collections.abc import Sequence

MiB = 2**20
SPARK_MAX_PARTITION_BYTES = 128 * MiB
"""Spark's default ``spark.sql.files.maxPartitionBytes``."""
SPARK_OPEN_COST_BYTES = 4 * MiB
"""Spark's default ``spark.sql.files.openCostInBytes``."""
PARQUET_ROW_GROUP_BYTES = 128 * MiB
"""parquet-mr's default ``parquet.block.size`` (its row-group size)."""
TASK_COST_BYTES = 2 * MiB
"""A task's fixed cost, counted as the bytes a task reads in the same time (as Spark counts a file's open cost).

Measured by ``bench/skew/`` (local[2], about 50 MB/s of parquet scan and shuffle write per core): 42
scan tasks took about 1.3 s more task time than 9 over the same 299 MB, about 40 ms a task, 2 MB at
that rate (launch, deserialization and scheduler delay were 15-20 ms of it, the rest the task's reader
and shuffle-writer set-up)."""


def simulate_scan_tasks(
    file_bytes: Sequence[int],
    *,
    max_partition_bytes: int,
    open_cost_bytes: int,
    min_partition_num: int,
    row_group_bytes: int | None = None,
) -> list[int]:
    """Each scan task's data bytes as Spark packs these files (``FilePartition``), in Spark's order.

    Files are split in chunks of ``maxSplitBytes``; a chunk's data is the row groups (of
    ``row_group_bytes``, the last one shorter; None: splittable anywhere) whose midpoint lies in it.
    Empty files are skipped.
    """
    check_file_sizes(file_bytes)
    if max_partition_bytes < 1 or open_cost_bytes < 0 or min_partition_num < 1:
        raise ValueError(
            "max_partition_bytes and min_partition_num must be >= 1 and open_cost_bytes >= 0, got "
            f"{max_partition_bytes}, {min_partition_num}, {open_cost_bytes}"
        )
    sizes = [int(b) for b in file_bytes if b > 0]
    total = sum(b + open_cost_bytes for b in sizes)
    max_split = min(max_partition_bytes, max(open_cost_bytes, total // min_partition_num))
    max_split = max(1, max_split)
    chunks: list[tuple[int, int]] = []  # (split length, data bytes)
    for size in sizes:
        for offset in range(0, size, max_split):
            length = min(max_split, size - offset)
            chunks.append((length, _row_group_data(size, offset, length, row_group_bytes)))
    chunks.sort(key=lambda c: c[0], reverse=True)  # Spark sorts by split length, a stable sort
    tasks: list[int] = []
    current, data, empty = 0, 0, True
    for length, chunk_data in chunks:
        if not empty and current + length > max_split:
            tasks.append(data)
            current, data, empty = 0, 0, True
        current += length + open_cost_bytes
        data += chunk_data
        empty = False
    if not empty:
        tasks.append(data)
    return tasks


def scan_cost(task_bytes: Sequence[int], slots: int, task_cost_bytes: int = TASK_COST_BYTES) -> int:
    """Predicted cost of a scan, in bytes: the busiest slot when Spark hands the tasks, in order, to the
    first free slot, each counting its bytes plus ``task_cost_bytes``. 0 for no tasks.
    """
    if slots < 1 or task_cost_bytes < 0:
        raise ValueError(f"slots must be >= 1 and task_cost_bytes >= 0, got {slots}, {task_cost_bytes}")
    busy = [0] * min(slots, max(1, len(task_bytes)))
    for size in task_bytes:
        heapq.heapreplace(busy, busy[0] + size + task_cost_bytes)
    return max(busy) if task_bytes else 0


def spread(task_bytes: Sequence[int]) -> float:
    """max/median of task bytes; 1.0 for fewer than two tasks, inf when the median task reads nothing."""
    if len(task_bytes) < 2:
        return 1.0
    median = median_bytes(sorted(task_bytes))
    if median <= 0:
        return math.inf if max(task_bytes) > 0 else 1.0
    return max(task_bytes) / median


def median_bytes(ordered: Sequence[int]) -> float:
    """The median of sorted byte counts; 0.0 for none."""
    return float(statistics.median(ordered)) if ordered else 0.0


def check_file_sizes(file_bytes: Sequence[int]) -> None:
    """Raise ValueError unless every size is an integer >= 0 (a bool is not one)."""
    bad = [b for b in file_bytes if isinstance(b, bool) or not isinstance(b, int) or b < 0]
    if bad:
        raise ValueError(f"file sizes must be integers >= 0 bytes, got {bad[:3]}")


def _row_group_data(size: int, offset: int, length: int, row_group_bytes: int | None) -> int:
    if row_group_bytes is None:
        return length
    r, end = row_group_bytes, offset + length
    # Row groups [k*r, min((k+1)*r, size)) belong to the chunk holding their midpoint. The full ones
    # (k < last) have midpoints k*r + r/2: offset <= k*r + r/2 < end, in integers (times 2).
    last = -(-size // r) - 1
    first_full = max(0, -((r - 2 * offset) // (2 * r)))
    after_full = min(last, -((r - 2 * end) // (2 * r)))
    data = max(0, after_full - first_full) * r
    if 2 * offset <= last * r + size < 2 * end:  # the last row group, to the end of the file
        data += size - last * r
    return data
