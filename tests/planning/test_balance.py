"""Scan balance from measured file sizes: the settings decided from Spark's packing replayed.

Every expected value is worked out by hand in the comment beside it (M = 1 MiB).
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_finegrained.planning import ClusterProfile, StageDemand, size_region
from airflow_provider_finegrained.planning.balance import decide_balance
from airflow_provider_finegrained.planning.scan_splits import producer_row_group_bytes

M = 2**20
K = 2**10


@pytest.mark.parametrize(
    ("files", "parallelism", "kwargs", "expected"),
    [
        # The decided parallelism is an upper bound: one 64M file, parallelism 4, 2 cores. At bytes / 4 = 16M
        # (open min(4M, 64M/8, 16M/32) = 0.5M): four tasks of 16M, two waves, cost 2 x (16M + 2M) = 36M.
        # One wave (2 tasks): split 32M, open min(4M, 8M, 1M) = 1M, bytesPerCore (64M + 1M) / 2 = 32.5M is
        # above it; chunks 32M + 32M, row groups of 16M / 4 = 4M (midpoints 2, 6, ..., 62), 8 in each:
        # cost 32M + 2M = 34M, the least; the coarser 2-task splits cost the same, the finest of them wins.
        # Spark's defaults: split min(128M, (64M + 4M) / 2 = 34M), one 128M row group -> [64M, 0]
        (
            [64 * M],
            4,
            {"cores": 2},
            {
                "split": 32 * M,
                "open": M,
                "cores": 2,
                "row_group": 4 * M,
                "tasks": [32 * M] * 2,
                "decided_tasks": [16 * M] * 4,
                "cost": 34 * M,
                "default_tasks": [64 * M, 0],
            },
        ),
        # With 4 cores the 4 tasks of 16M are one wave (cost 18M); coarser splits are cut at bytesPerCore
        # (64M + 0.5M) / 4 = 16.125M into the same four tasks: bytes / parallelism stays.
        (
            [64 * M],
            4,
            {"cores": 4},
            {"split": 16 * M, "open": M // 2, "tasks": [16 * M] * 4, "cost": 18 * M},
        ),
        # Next-fit leaves gaps: 16 files of 4M, parallelism 8, 2 cores. At 8M (open min(4M, 4M/8, 8M/32) =
        # 0.25M) a file counts 4.25M and a second one would reach 8.25M: 16 one-file tasks, cost 8 x 6M = 48M.
        # One wave: at 32M (open 0.5M, a file counts 4.5M) 7 files make 31.5M and an 8th 35.5M: tasks of 28M,
        # 28M, 8M, cost 28M + 2M + 8M + 2M = 40M; 12% above, at 35.84M (ceil(64M x 112 / 200) = 37,580,964
        # bytes), the 8th file fits (35.5M): two tasks of 32M, cost 34M; 10% above (35.2M) it does not.
        (
            [4 * M] * 16,
            8,
            {"cores": 2},
            {
                "split": 37_580_964,
                "open": M // 2,
                "tasks": [32 * M] * 2,
                "decided_tasks": [4 * M] * 16,
                "cost": 34 * M,
                "default_tasks": [32 * M] * 2,
            },
        ),
        # many tiny files: 1000 x 10K over 4, 2 cores. At bytes / 4 = 2,560,000 (open 10K/8 = 1280, a file
        # counts 11,520) a task closes after 222 files: 222 x 4 + 112, cost 3 tasks on one slot. One wave: the
        # split is cut at bytesPerCore (10,240,000 + 1,280,000) / 2 = 5,760,000; a task takes files while
        # 11,520k + 10,240 <= the split: at 14% above 5,120,000 (5,836,800 -> 5,760,000) 500 files, two even
        # tasks (cost 5,120,000 + 2M); at 12% (5,734,400) 497 files and a third task of 6.
        # Spark's defaults: each file counts 4M + 10K, 32 to a 128M task: 31 tasks of 32 and one of 8.
        (
            [10 * K] * 1000,
            4,
            {"cores": 2},
            {
                "split": 5_836_800,
                "open": 1280,
                "tasks": [500 * 10 * K] * 2,
                "decided_tasks": [222 * 10 * K] * 4 + [112 * 10 * K],
                "cost": 500 * 10 * K + 2 * M,
                "default_tasks": [32 * 10 * K] * 31 + [8 * 10 * K],
            },
        ),
        # fewer bytes than 1M per task: the split stays 1M and the open cost Spark's 4M (packing tasks of under
        # 1M gains nothing; one task per small file keeps a shuffle's map outputs spread over the executors);
        # one wave of 2 would be 1.5M a task (open 48K) but a second 1M file does not fit (2.05M): still 3
        # tasks, no cheaper; the finest split wins the tie.
        ([M, M, M], 8, {"cores": 2}, {"split": M, "open": 4 * M, "row_group": M, "tasks": [M, M, M]}),
        # more cores than the split asks for: Spark cuts at bytesPerCore (8M + 256K) / 4 = 2.0625M, below the 8M
        # split; row groups of 8M / 4 = 2M (midpoints 1, 3, 5, 7) give each of the four chunks one.
        ([8 * M], 1, {"cores": 4}, {"split": 8 * M, "open": 256 * K, "row_group": 2 * M, "tasks": [2 * M] * 4}),
        # a file read as one 128M row group (its footer) cannot be cut: the split is raised from 16M to the
        # file, 64M (under two row groups); open min(4M, 8M, 2M) = 2M. Spark still cuts at bytesPerCore
        # (64M + 2M) / 2 = 33M (the open cost would have to reach 33M; it stays at most Spark's 4M): chunks
        # 33M and 31M, the row group's midpoint (32M) in the first: [64M, 0], as decided; no coarser split.
        (
            [64 * M],
            4,
            {"row_group_bytes": 128 * M, "cores": 2},
            {"split": 64 * M, "open": 2 * M, "tasks": [64 * M, 0], "decided_tasks": [64 * M, 0]},
        ),
        # TPC-H SF 0.01's lineitem: one file of 1,927,111 bytes, one row group of 1,920,431 (its footer),
        # parallelism 2, 2 cores. Split raised from 1M to the file (under two row groups); open
        # min(4M, 240,888, 60,222) = 60,222, and bytesPerCore (1,927,111 + 60,222) / 2 = 993,666 is below
        # min(split, max(1,920,431, min(file, 2 x 1,920,431)), 4M) = 1,927,111: the open cost is raised to
        # it, Spark's split stays the file: one task (before: a second, empty one; Spark's defaults also run one).
        (
            [1_927_111],
            2,
            {"row_group_bytes": 1_920_431, "cores": 2},
            {"split": 1_927_111, "open": 1_927_111, "tasks": [1_927_111], "default_tasks": [1_927_111]},
        ),
        # empty files carry nothing: they are not counted in the median; one core: one task of 8M (cost 10M)
        # beats two of 4M (12M), at 8M x 1.0 (open min(4M, 1M, 256K) = 256K)
        ([0, 0, 8 * M], 2, {}, {"split": 8 * M, "open": 256 * K, "tasks": [8 * M], "decided_tasks": [4 * M, 4 * M]}),
        # A hot file: 48M (75% of 64M, 12x the median 4M) and four of 4M, parallelism 8, 2 cores, 2M row groups.
        # 75% is more than one of 2 slots' share: chunks of at most ceil(48M / 4) = 12M, so the cheaper plans
        # that read it in 1 or 2 tasks (2 tasks of 34M and 30M, cost 36M) are not tried. At 8M: 6 chunks of 8M
        # and the 4M files alone (4M + 0.5M open + 4M > 8M): 10 tasks, cost (6 x 10M + 4 x 6M) / 2 = 42M.
        # At 12% above 64M / 6 (ceil(64M x 112 / 600) = 12,526,988, 11.95M; open 11.95M / 32 = 391,468):
        # chunks 11.95M x 4 + 0.21M hold the row groups with midpoints 1..11, 13..23, 25..35, 37..47: 12M each,
        # the last none; two 4M files a task (4.37M + 4M fits, a third does not), the 0.21M chunk with them:
        # [12, 12, 12, 12, 8, 8], cost 14 + 14 + 10 = 38M, the least up to 12M.
        (
            [48 * M] + [4 * M] * 4,
            8,
            {"cores": 2, "row_group_bytes": 2 * M},
            {
                "split": 12_526_988,
                "open": 391_468,
                "tasks": [12 * M] * 4 + [8 * M] * 2,
                "decided_tasks": [8 * M] * 6 + [4 * M] * 4,
                "cost": 38 * M,
            },
        ),
        # slots below the cores (task.cpus 2 on 4 cores): waves over 2 slots; 4 tasks of 16M cost 36M, and
        # Spark cuts any split at bytesPerCore (64M + 0.5M) / 4 = 16.125M: bytes / parallelism stays.
        ([64 * M], 4, {"cores": 4, "slots": 2}, {"split": 16 * M, "tasks": [16 * M] * 4, "cost": 36 * M}),
    ],
)
def test_decide_balance_table(
    files: list[int], parallelism: int, kwargs: dict[str, Any], expected: dict[str, Any]
) -> None:
    balance = decide_balance(files, parallelism, **kwargs)
    assert balance is not None
    got = {
        "split": balance.max_partition_bytes,
        "open": balance.open_cost_bytes,
        "cores": balance.cores,
        "row_group": balance.row_group_bytes,
        "tasks": list(balance.task_bytes),
        "decided_tasks": list(balance.decided_task_bytes),
        "cost": balance.cost,
        "default_tasks": list(balance.default_task_bytes),
    }
    assert {k: got[k] for k in expected} == expected
    conf = balance.session_conf()
    assert conf == {
        "spark.sql.files.maxPartitionBytes": str(balance.max_partition_bytes),
        "spark.sql.files.openCostInBytes": str(balance.open_cost_bytes),
    }


def test_twenty_times_the_median_is_balanced_and_explained() -> None:
    # 40M + 19 x 2M = 78M, parallelism 8 on 8 cores. The 40M file holds 51% of the bytes, more than one of 8
    # slots' share: it is read in chunks of at most ceil(40M / (2 x 8)) = 2.5M, below bytes / parallelism
    # 9.75M, so the split stays 9.75M. Tasks 10, 10, 10, 8 and five of 8 (the 1M chunk with three 2M files);
    # 9 tasks on 8 slots: the ninth (8M) goes to the first slot free, one that ran an 8M task: 20M.
    balance = decide_balance([40 * M] + [2 * M] * 19, 8, row_group_bytes=2 * M, cores=8)
    assert balance is not None
    assert balance.max_partition_bytes == 78 * M // 8
    record = balance.to_dict()
    assert record["predicted_max_over_median"] == 1.25  # 10M / 8M
    assert record["predicted_waves"] == 2 and record["slots"] == 8
    assert record["cost"] == {
        "task_cost_bytes": 2 * M,
        "predicted": 20 * M,
        "at_decided_parallelism": {"tasks": 9, "max_over_median": 1.25, "cost": 20 * M},
        # Spark's defaults: split min(128M, (78M + 80M) / 8 = 19.75M), the 40M file (one row group) in one task
        "spark_defaults": 40 * M + 2 * M,
    }
    assert record["file_bytes"] == {"min": 2 * M, "median": 2 * M, "max": 40 * M}
    assert record["spark_default_max_over_median"] > 2
    assert "20.0x the median" in record["why"] and "cut into chunks" in record["why"]
    assert "split at 9.8 MiB (bytes / parallelism 8)" in record["why"]
    assert (
        "the largest file holds 51% of the bytes, more than one of 8 slots' share: a hot key's rows, which AQE's "
        "skew join can split only by map task; read in chunks of at most 9.8 MiB (2 waves of tasks)"
    ) in record["why"]
    assert "open cost 0.2 MiB instead of Spark's 4 MiB" in record["why"]


def test_fewer_tasks_are_explained_with_their_cost() -> None:
    # 64M in one file, parallelism 4, 2 cores: table case 1 (two tasks of 32M, cost 34M against 36M)
    balance = decide_balance([64 * M], 4, cores=2)
    assert balance is not None
    assert (
        "split at 32.0 MiB: 2 tasks in 1 wave over 2 slots, the least predicted cost with max/median <= 2 (the "
        "busiest slot's bytes plus 2.0 MiB a task: 34.0 MiB; at bytes / parallelism 4: 4 tasks, 36.0 MiB)"
    ) in balance.why
    assert "hot key" not in balance.why  # one file is not skewed against itself


@pytest.mark.parametrize(
    ("files", "parallelism", "kwargs", "message"),
    [
        ([], 0, {}, "parallelism must be an integer >= 1, got 0"),
        ([1], True, {}, "parallelism must be an integer >= 1, got True"),
        ([1, -5], 2, {}, "file sizes must be integers >= 0 bytes, got [-5]"),
        ([1], 2, {"row_group_bytes": 0}, "row_group_bytes must be >= 1, got 0"),
    ],
)
def test_decide_balance_rejects(files: list[int], parallelism: Any, kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        decide_balance(files, parallelism, **kwargs)


@pytest.mark.parametrize("files", [[], [0], [0, 0, 0]])
def test_no_data_no_balance(files: list[int]) -> None:
    assert decide_balance(files, 4) is None


@pytest.mark.parametrize(
    ("bytes_per_task", "expected"),
    [(64 * M, 16 * M), (4 * M, M), (2 * M, M), (1, M), (2**31, 128 * M), (512 * M + 4, 128 * M)],
)
def test_producer_row_group_table(bytes_per_task: int, expected: int) -> None:
    assert producer_row_group_bytes(bytes_per_task) == expected


def test_size_region_sets_the_balance_and_says_so() -> None:
    profile = ClusterProfile(total_cores=8, total_memory=64 * 2**30, executor_memory=8 * 2**30, local=True)
    files = (40 * M,) + (2 * M,) * 19
    sizing = size_region(
        [StageDemand("skewed", 8, consumed_bytes=sum(files), input_file_bytes=files), StageDemand("plain", 8)],
        profile,
    )
    skewed, plain = sizing.stages["skewed"], sizing.stages["plain"]
    # the split of test_twenty_times_the_median_is_balanced_and_explained (8 slots, local[8])
    assert skewed.session_conf() == {
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.files.maxPartitionBytes": str(78 * M // 8),
        "spark.sql.files.openCostInBytes": str(256 * K),
    }
    assert skewed.input_balance is not None and skewed.input_balance["predicted_max_over_median"] <= 2
    assert any(n.startswith("input balance: 20 files split at") for n in skewed.notes)
    # no files scanned (an in-region handover): today's settings, no record, no note
    assert plain.input_balance is None and plain.session_conf() == {
        "spark.sql.shuffle.partitions": "8",
        "spark.sql.files.maxPartitionBytes": str(2**20),
    }
    assert not any(n.startswith("input balance") for n in plain.notes)
