"""Spark's packing of a scan's files replayed, and the predicted cost of its tasks.

Every expected value is worked out by hand in the comment beside it (M = 1 MiB).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from airflow_provider_finegrained.planning.scan_packing import scan_cost, simulate_scan_tasks, spread

M = 2**20


@pytest.mark.parametrize(
    ("files", "kwargs", "expected"),
    [
        # nothing to read; empty files are skipped
        ([], {"max_partition_bytes": 4, "open_cost_bytes": 0, "min_partition_num": 1}, []),
        ([0, 0], {"max_partition_bytes": 4, "open_cost_bytes": 0, "min_partition_num": 1}, []),
        # one file of 10, split 4: chunks 4, 4, 2, each alone
        ([10], {"max_partition_bytes": 4, "open_cost_bytes": 0, "min_partition_num": 1}, [4, 4, 2]),
        # no open cost: four files of 1 fill one split of 4
        ([1, 1, 1, 1], {"max_partition_bytes": 4, "open_cost_bytes": 0, "min_partition_num": 1}, [4]),
        # open cost 1: after two files the task counts 4, the third would make it 5 > 4
        ([1, 1, 1, 1], {"max_partition_bytes": 4, "open_cost_bytes": 1, "min_partition_num": 1}, [2, 2]),
        # minPartitionNum 4: bytesPerCore 8 / 4 = 2 is below maxPartitionBytes 100, so the split is 2
        ([8], {"max_partition_bytes": 100, "open_cost_bytes": 0, "min_partition_num": 4}, [2, 2, 2, 2]),
        # open cost above maxPartitionBytes: min(2, max(5, 16)) = 2; every chunk alone, largest first
        ([3, 3], {"max_partition_bytes": 2, "open_cost_bytes": 5, "min_partition_num": 1}, [2, 2, 1, 1]),
        # sorted by size, largest first: 5 alone (5 + 1 > 5), then 3 + 1 (3+1 counted, 4+1 = 5 fits)
        ([1, 5, 3], {"max_partition_bytes": 5, "open_cost_bytes": 0, "min_partition_num": 1}, [5, 4]),
        # row groups of 4 in a file of 10 (midpoints 2, 6, 9), splits of 3: [0,3) holds 2, [3,6) none,
        # [6,9) holds 6, [9,10) holds 9 -> data 4, 0, 4, 2
        (
            [10],
            {"max_partition_bytes": 3, "open_cost_bytes": 0, "min_partition_num": 1, "row_group_bytes": 4},
            [4, 0, 4, 2],
        ),
        # one row group larger than the file: the split holding the midpoint (5) reads it all
        (
            [10],
            {"max_partition_bytes": 4, "open_cost_bytes": 0, "min_partition_num": 1, "row_group_bytes": 128},
            [0, 10, 0],
        ),
    ],
)
def test_simulate_scan_tasks_table(files: list[int], kwargs: dict[str, Any], expected: list[int]) -> None:
    assert simulate_scan_tasks(files, **kwargs) == expected


@pytest.mark.parametrize(
    ("tasks", "expected"),
    [([], 1.0), ([7], 1.0), ([2, 2, 2], 1.0), ([1, 2, 8], 4.0), ([0, 0, 5], math.inf), ([0, 0], 1.0)],
)
def test_spread_table(tasks: list[int], expected: float) -> None:
    assert spread(tasks) == expected


@pytest.mark.parametrize(
    ("tasks", "slots", "cost", "expected"),
    [
        ([], 2, 5, 0),  # nothing to run
        ([5], 4, 2, 7),  # one task: its bytes and its fixed cost
        ([10, 10, 10], 2, 0, 20),  # the third task goes to a slot after the first
        # in Spark's order to the first free slot: 30 -> A (31); 10 -> B (11); 10 -> B (22); 10 -> B (33)
        ([30, 10, 10, 10], 2, 1, 33),
        ([4, 4, 4, 4], 4, 1, 5),  # one wave
    ],
)
def test_scan_cost_table(tasks: list[int], slots: int, cost: int, expected: int) -> None:
    assert scan_cost(tasks, slots, cost) == expected


def test_scan_cost_rejects() -> None:
    with pytest.raises(ValueError, match="slots must be >= 1 and task_cost_bytes >= 0, got 0, 1"):
        scan_cost([1], 0, 1)
