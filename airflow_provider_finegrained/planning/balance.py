"""Even scan tasks from the measured size of every file a stage reads.

The provider does not reorder files; it sets two scan settings from the measured sizes, so that
Spark's own packing (:mod:`~airflow_provider_finegrained.planning.scan_packing`) gives even tasks, and
asks producers for row groups small enough to split:

- ``maxPartitionBytes``: the split of the fewest whole waves of tasks over the slots that keep the
  predicted max/median at most 2 (a large file is cut in chunks of that size, small files fill up to
  it). The stage's decided parallelism is the upper bound (its split, bytes / parallelism, the finest
  one tried), not the target: a scan task streams its split, so its memory does not grow with it, while
  every task pays a fixed cost (launch, deserialization, scheduler delay, its shuffle files). Among the
  candidate splits the one with the least predicted stage cost wins: Spark's greedy assignment of the
  predicted tasks to the slots, each task counting its bytes plus ``TASK_COST_BYTES``. A skewed
  input's largest file holding more than one slot's share (a hot key's rows) is read by at least
  :data:`HOT_FILE_WAVES` waves of tasks: AQE's skew join splits its partition only by map task;
- ``openCostInBytes`` at most 1/8 of the median file and 1/32 of the split (Spark's 4 MiB makes a task
  of small files look full long before it is: its data would shrink by the open costs it counts);
- ``minPartitionNum`` stays Spark's default, the cores (it applies to every scan of the stage alike).

Spark's packing is replayed for every split tried, so the decision carries the predicted bytes of
every task, their max/median and the predicted cost it traded against. Pure: no Spark import.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_finegrained.planning.scan_packing import (
    PARQUET_ROW_GROUP_BYTES,
    SPARK_MAX_PARTITION_BYTES,
    SPARK_OPEN_COST_BYTES,
    TASK_COST_BYTES,
    MiB,
    check_file_sizes,
    median_bytes,
    scan_cost,
    simulate_scan_tasks,
    spread,
)
from airflow_provider_finegrained.planning.units import format_mib

MIN_SPLIT_BYTES = 1 * MiB
MIN_ROW_GROUP_BYTES = 1 * MiB
ROW_GROUPS_PER_SPLIT = 4
"""A split holds about this many row groups, so whole row groups put a task within 1/4 of its split."""
OPEN_COST_SHARE_OF_MEDIAN_FILE = 8
OPEN_COST_SHARE_OF_SPLIT = 32
SKEWED_INPUT_SPREAD = 2.0
"""A stage's scanned input is skewed when its largest file is above this multiple of the median file."""
MAX_SPREAD = 2.0
"""The largest predicted scan task may hold at most this multiple of the median one."""
SPLIT_STEP_PERCENTS = tuple(range(0, 21, 2))
"""Each whole-wave candidate's split is tried this many percent above bytes / tasks: Spark's next-fit
packing and the open costs it counts leave gaps, so bytes / n alone often packs into n + 1 tasks."""
MAX_CANDIDATE_WAVES = 24
"""At most this many wave counts are tried (spread geometrically up to the decided parallelism's)."""
HOT_FILE_WAVES = 2
"""A file holding more than one slot's share of a skewed input is read by at least this many waves of tasks."""
SIMULATION_BUDGET = 200_000
"""Candidate splits x scanned files replayed at most (evenly thinned above it): about half a second of planning."""


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


def producer_row_group_bytes(consumer_bytes_per_task: int) -> int:
    """The ``parquet.block.size`` a producer writes with, so its consumers' splits can cut its files.

    A quarter of the consumers' bytes per task, within [1 MiB, parquet's 128 MiB default].
    """
    if consumer_bytes_per_task < 1:
        raise ValueError(f"consumer bytes per task must be >= 1, got {consumer_bytes_per_task}")
    return max(MIN_ROW_GROUP_BYTES, min(PARQUET_ROW_GROUP_BYTES, consumer_bytes_per_task // ROW_GROUPS_PER_SPLIT))


def decide_balance(
    file_bytes: Sequence[int],
    parallelism: int,
    *,
    row_group_bytes: int | None = None,
    cores: int | None = None,
    slots: int | None = None,
) -> InputBalance | None:
    """The scan settings that spread ``file_bytes`` evenly over at most ``parallelism`` tasks; None with no data.

    ``row_group_bytes``: the largest row group of the files, read from their footers; None: what the
    provider's producers write for a consumer of the decided parallelism's split
    (:func:`producer_row_group_bytes`). A known size also keeps every split at least one row group (or
    the largest file), since a smaller one only adds tasks that read nothing.
    ``cores``: the application's cores, Spark's default ``minPartitionNum`` (None: 1); Spark cuts a scan
    below the split when its bytes over the cores are smaller. ``slots``: the tasks that run at once
    (None: ``cores``). The split is that of the fewest whole waves over the slots whose predicted tasks
    keep max/median at most 2, at the least predicted cost (see the module's docstring).
    """
    _check_arguments(file_bytes, parallelism, row_group_bytes)
    sizes = tuple(int(b) for b in file_bytes if b > 0)
    if not sizes:
        return None
    scan = _scan(sizes, parallelism, row_group_bytes, cores, slots)
    decided = _plan(scan, scan.finest)
    hot = _holds_hot_key(scan)
    coarsest = _coarsest_split(scan, hot)
    chosen = _cheapest_even([decided, *_candidate_plans(scan, coarsest)])
    return InputBalance(
        max_partition_bytes=chosen.split,
        open_cost_bytes=chosen.open_cost,
        cores=scan.cores,
        row_group_bytes=scan.row_group_bytes,
        file_count=len(sizes),
        file_bytes=(min(sizes), scan.median, scan.largest),
        task_bytes=chosen.tasks,
        default_task_bytes=_spark_default_tasks(scan),
        why=_why(scan, decided, chosen, hot, coarsest),
        slots=scan.slots,
        decided_task_bytes=decided.tasks,
    )


@dataclass(frozen=True)
class _Scan:
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
class _Plan:
    split: int
    open_cost: int
    tasks: tuple[int, ...]
    spread: float
    cost: int


def _check_arguments(file_bytes: Sequence[int], parallelism: int, row_group_bytes: int | None) -> None:
    if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
        raise ValueError(f"parallelism must be an integer >= 1, got {parallelism!r}")
    check_file_sizes(file_bytes)
    if row_group_bytes is not None and row_group_bytes < 1:
        raise ValueError(f"row_group_bytes must be >= 1, got {row_group_bytes}")


def _scan(
    sizes: tuple[int, ...], parallelism: int, row_group_bytes: int | None, cores: int | None, slots: int | None
) -> _Scan:
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
    # the parallelism it cut a small dimension scan into as many tiny tasks (measured, bench/skew.py).
    cores = max(1, cores or 1)
    return _Scan(
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


def _open_cost(scan: _Scan, split: int) -> int:
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


def _plan(scan: _Scan, split: int) -> _Plan:
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
    return _Plan(split, open_cost, tasks, spread(tasks), scan_cost(tasks, scan.slots, TASK_COST_BYTES))


def _spark_default_tasks(scan: _Scan) -> tuple[int, ...]:
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


def _holds_hot_key(scan: _Scan) -> bool:
    """Whether the largest file is skewed against the median and holds more than one slot's share."""
    return scan.largest > SKEWED_INPUT_SPREAD * scan.median and scan.largest / scan.total > 1 / scan.slots


def _coarsest_split(scan: _Scan, hot: bool) -> int:
    """The coarsest split tried (never below ``scan.finest``)."""
    # No coarser than Spark's 128 MiB default (or bytes / parallelism when that is coarser): a scan task
    # streams its split, but beyond Spark's default a task is larger than any Spark user expects of a scan.
    coarsest = max(scan.finest, SPARK_MAX_PARTITION_BYTES)
    if not hot:
        return coarsest
    # A hot key's file above one slot's share: its rows are a shuffle partition that AQE's skew join can
    # split only at map-output boundaries, so the scan's tasks are also the pieces it can make. Read it
    # in at least two waves of tasks, so the pieces spread over every slot and outnumber the other join
    # tasks (measured: 2 scan tasks left a 75% key in 2 join pieces, join max/median 3.4).
    return max(scan.finest, min(coarsest, math.ceil(scan.largest / (HOT_FILE_WAVES * scan.slots))))


def _candidate_plans(scan: _Scan, coarsest: int) -> list[_Plan]:
    """The plans of the whole-wave splits coarser than ``scan.finest``, thinned to the simulation budget."""
    splits = _candidate_splits(scan.total, scan.finest, scan.parallelism, scan.slots, coarsest)
    most = max(8, SIMULATION_BUDGET // len(scan.sizes))
    if len(splits) > most:
        splits = [splits[round(i * (len(splits) - 1) / (most - 1))] for i in range(most)]
    return [_plan(scan, split) for split in splits]


def _cheapest_even(plans: Sequence[_Plan]) -> _Plan:
    """The least predicted cost among the even plans, the fewest tasks on a tie; if none is even (row groups
    too large to cut), the most even one."""
    even = [p for p in plans if p.spread <= MAX_SPREAD]
    if even:
        return min(even, key=lambda p: (p.cost, len(p.tasks), p.split))
    return min(plans, key=lambda p: (p.spread, p.cost, len(p.tasks)))


def _why(scan: _Scan, decided: _Plan, chosen: _Plan, hot: bool, coarsest: int) -> str:
    """Why the scan is split as ``chosen``, for the decision's trace."""
    split, open_cost, row_group = chosen.split, chosen.open_cost, scan.row_group_bytes
    median, largest = scan.median, scan.largest
    reasons = [
        f"{len(scan.sizes)} files, median {format_mib(median)}, largest {format_mib(largest)} "
        f"({largest / median:.1f}x the median)",
        _split_reason(scan, decided, chosen),
    ]
    if hot:
        reasons.append(
            f"the largest file holds {largest / scan.total:.0%} of the bytes, more than one of {scan.slots} slots' "
            f"share: a hot key's rows, which AQE's skew join can split only by map task; read in chunks of at most "
            f"{format_mib(coarsest)} ({HOT_FILE_WAVES} waves of tasks)"
        )
    if largest > split:
        reasons.append(
            f"files above {format_mib(split)} are cut into chunks read by separate tasks "
            f"(row groups of {format_mib(row_group)} {'read from the footers' if scan.groups_known else 'assumed'})"
        )
    if scan.groups_known and (scan.total + len(scan.sizes) * open_cost) // scan.cores <= open_cost:
        reasons.append(
            f"open cost {format_mib(open_cost)} so Spark's bytes-per-core cut ((bytes + open costs) / "
            f"{scan.cores} cores) does not split a row group of {format_mib(row_group)} (read from the files' footers)"
        )
    elif open_cost < SPARK_OPEN_COST_BYTES:
        reasons.append(
            f"open cost {format_mib(open_cost)} instead of Spark's 4 MiB so small files pack up to the split"
        )
    if largest > split and row_group > split:
        reasons.append(
            f"row groups of {format_mib(row_group)} are larger than the split: a file cannot be cut below that"
        )
    reasons.append(f"predicted {len(chosen.tasks)} tasks, max/median {spread(chosen.tasks):.2f}")
    return "; ".join(reasons)


def _split_reason(scan: _Scan, decided: _Plan, chosen: _Plan) -> str:
    """Where the chosen split comes from: the decided parallelism (raised to a row group) or the least cost."""
    split, parallelism = chosen.split, scan.parallelism
    if chosen.split == decided.split and scan.finest > scan.by_parallelism:
        return (
            f"split raised to {format_mib(split)} from bytes / parallelism {parallelism} "
            f"({format_mib(scan.by_parallelism)}): "
            f"a split below a row group of {format_mib(scan.row_group_bytes)} only adds tasks that read nothing"
        )
    if chosen.split == decided.split:
        return f"split at {format_mib(split)} (bytes / parallelism {parallelism})"
    tasks, slots = len(chosen.tasks), scan.slots
    waves = math.ceil(tasks / slots)
    return (
        f"split at {format_mib(split)}: {tasks} tasks in {waves} wave{'s' if waves != 1 else ''} over {slots} "
        f"slots, the least predicted cost with max/median <= {MAX_SPREAD:g} (the busiest slot's bytes plus "
        f"{format_mib(TASK_COST_BYTES)} a task: {format_mib(chosen.cost)}; at bytes / parallelism {parallelism}: "
        f"{len(decided.tasks)} tasks, {format_mib(decided.cost)})"
    )


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
