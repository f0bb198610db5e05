"""The splits tried for a stage's scan: what bounds them, and each one's replayed tasks and predicted cost.

The finest split is the decided parallelism's (bytes / parallelism), raised to a row group when the
files' footers give one; the others are those of whole waves of tasks over the slots, a little above
bytes / tasks, up to a coarsest one the decision sets. Each is replayed with Spark's packing
(:mod:`~airflow_provider_finegrained.planning.scan_packing`) at the open cost that packs small files up
to it. Pure: no Spark import.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from airflow_provider_finegrained.planning.scan_packing import (
    PARQUET_ROW_GROUP_BYTES,
    SPARK_MAX_PARTITION_BYTES,
    SPARK_OPEN_COST_BYTES,
    TASK_COST_BYTES,
    MiB,
    scan_cost,
    simulate_scan_tasks,
    spread,
)

MIN_SPLIT_BYTES = 1 * MiB
MIN_ROW_GROUP_BYTES = 1 * MiB
ROW_GROUPS_PER_SPLIT = 4
"""A split holds about this many row groups, so whole row groups put a task within 1/4 of its split."""
OPEN_COST_SHARE_OF_MEDIAN_FILE = 8
OPEN_COST_SHARE_OF_SPLIT = 32
SPLIT_STEP_PERCENTS = tuple(range(0, 21, 2))
"""Each whole-wave candidate's split is tried this many percent above bytes / tasks: Spark's next-fit
packing and the open costs it counts leave gaps, so bytes / n alone often packs into n + 1 tasks."""
MAX_CANDIDATE_WAVES = 24
"""At most this many wave counts are tried (spread geometrically up to the decided parallelism's)."""
SIMULATION_BUDGET = 200_000
"""Candidate splits x scanned files replayed at most (evenly thinned above it): about half a second of planning."""


def producer_row_group_bytes(consumer_bytes_per_task: int) -> int:
    """The ``parquet.block.size`` a producer writes with, so its consumers' splits can cut its files.

    A quarter of the consumers' bytes per task, within [1 MiB, parquet's 128 MiB default].
    """
    if consumer_bytes_per_task < 1:
        raise ValueError(f"consumer bytes per task must be >= 1, got {consumer_bytes_per_task}")
    return max(MIN_ROW_GROUP_BYTES, min(PARQUET_ROW_GROUP_BYTES, consumer_bytes_per_task // ROW_GROUPS_PER_SPLIT))


@dataclass(frozen=True)
class ScanFacts:
    """One stage's scanned files and what bounds their split, before any split is tried."""

    sizes: tuple[int, ...]
    """The non-empty files' bytes, in the order given."""
    total: int
    median: int
    largest: int
    parallelism: int
    by_parallelism: int
    """bytes / parallelism (at least 1 MiB)."""
    finest: int
    """The finest split tried: ``by_parallelism``, raised to a known row group."""
    row_group_bytes: int
    groups_known: bool
    """Whether ``row_group_bytes`` was read from the files' footers (else what producers write)."""
    cores: int
    slots: int


@dataclass(frozen=True)
class SplitPlan:
    """One split tried: its open cost, the tasks Spark's packing gives, their max/median and predicted cost."""

    split: int
    open_cost: int
    tasks: tuple[int, ...]
    spread: float
    cost: int


def scan_facts(
    sizes: tuple[int, ...], parallelism: int, row_group_bytes: int | None, cores: int | None, slots: int | None
) -> ScanFacts:
    """The facts every candidate split is judged by (``sizes`` non-empty)."""
    total = sum(sizes)
    largest = max(sizes)
    by_parallelism = max(MIN_SPLIT_BYTES, math.ceil(total / parallelism))
    if row_group_bytes is None:
        finest, groups = by_parallelism, producer_row_group_bytes(by_parallelism)
    else:
        # Spark reads whole row groups: a split below one only adds tasks that read nothing (and a file
        # of under two row groups holds one, plus its footer).
        finest = max(by_parallelism, largest if largest < 2 * row_group_bytes else row_group_bytes)
        groups = row_group_bytes
    # minPartitionNum stays Spark's default (the cores): it applies to every scan of the stage, and set to
    # the parallelism it cut a small dimension scan into as many tiny tasks (measured, bench/skew/).
    cores = max(1, cores or 1)
    return ScanFacts(
        sizes=sizes,
        total=total,
        median=int(statistics.median(sizes)),
        largest=largest,
        parallelism=parallelism,
        by_parallelism=by_parallelism,
        finest=finest,
        row_group_bytes=groups,
        groups_known=row_group_bytes is not None,
        cores=cores,
        slots=max(1, slots or cores),
    )


def plan_split(scan: ScanFacts, split: int) -> SplitPlan:
    """Spark's packing of the scan at ``split``, replayed, and its predicted cost."""
    open_cost = _open_cost(scan, split)
    tasks = tuple(
        simulate_scan_tasks(
            scan.sizes,
            max_partition_bytes=split,
            open_cost_bytes=open_cost,
            min_partition_num=scan.cores,
            row_group_bytes=scan.row_group_bytes,
        )
    )
    return SplitPlan(split, open_cost, tasks, spread(tasks), scan_cost(tasks, scan.slots, TASK_COST_BYTES))


def _open_cost(scan: ScanFacts, split: int) -> int:
    """The ``openCostInBytes`` that packs small files up to ``split``."""
    open_cost = max(
        1, min(SPARK_OPEN_COST_BYTES, scan.median // OPEN_COST_SHARE_OF_MEDIAN_FILE, split // OPEN_COST_SHARE_OF_SPLIT)
    )
    if split <= MIN_SPLIT_BYTES:
        # Tasks of under 1 MiB are all overhead: packing them evenly gains nothing, and Spark's open cost
        # keeps one task per small file, so a shuffle's map outputs stay spread over the executors.
        open_cost = SPARK_OPEN_COST_BYTES
    if scan.groups_known:
        # Spark also cuts at (bytes + open costs) / cores: keep that from cutting below a known row group.
        row_group = scan.row_group_bytes
        floor = min(split, max(row_group, min(scan.largest, 2 * row_group)), SPARK_OPEN_COST_BYTES)
        if (scan.total + len(scan.sizes) * open_cost) // scan.cores < floor:
            open_cost = max(open_cost, floor)
    return open_cost


def spark_default_tasks(scan: ScanFacts) -> tuple[int, ...]:
    """The scan's tasks with Spark's default settings and parquet's default row groups."""
    return tuple(
        simulate_scan_tasks(
            scan.sizes,
            max_partition_bytes=SPARK_MAX_PARTITION_BYTES,
            open_cost_bytes=SPARK_OPEN_COST_BYTES,
            min_partition_num=scan.cores,
            row_group_bytes=PARQUET_ROW_GROUP_BYTES,
        )
    )


def candidate_plans(scan: ScanFacts, coarsest: int) -> list[SplitPlan]:
    """The plans of the whole-wave splits coarser than ``scan.finest``, thinned to the simulation budget."""
    splits = _candidate_splits(scan.total, scan.finest, scan.parallelism, scan.slots, coarsest)
    most = max(8, SIMULATION_BUDGET // len(scan.sizes))
    if len(splits) > most:
        splits = [splits[round(i * (len(splits) - 1) / (most - 1))] for i in range(most)]
    return [plan_split(scan, split) for split in splits]


def _candidate_splits(total: int, finest: int, parallelism: int, slots: int, coarsest: int) -> list[int]:
    """Splits for whole waves of tasks over the slots, coarser than the decided parallelism's ``finest``
    and at most ``coarsest``."""
    most = max(1, math.ceil(parallelism / slots))
    if most <= MAX_CANDIDATE_WAVES:
        waves = list(range(1, most + 1))
    else:
        waves = sorted({round(most ** (i / (MAX_CANDIDATE_WAVES - 1))) for i in range(MAX_CANDIDATE_WAVES)})
    splits = set()
    for wave in waves:
        tasks = min(parallelism, wave * slots)
        for percent in SPLIT_STEP_PERCENTS:
            split = -(-total * (100 + percent) // (100 * tasks))
            if finest < split <= coarsest:
                splits.add(split)
    return sorted(splits, reverse=True)
