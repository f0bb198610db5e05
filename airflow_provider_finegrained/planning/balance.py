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
from collections.abc import Sequence

from airflow_provider_finegrained.planning.input_balance import InputBalance
from airflow_provider_finegrained.planning.scan_packing import (
    SPARK_MAX_PARTITION_BYTES,
    SPARK_OPEN_COST_BYTES,
    TASK_COST_BYTES,
    check_file_sizes,
    spread,
)
from airflow_provider_finegrained.planning.scan_splits import (
    ScanFacts,
    SplitPlan,
    candidate_plans,
    plan_split,
    scan_facts,
    spark_default_tasks,
)
from airflow_provider_finegrained.planning.units import format_mib

SKEWED_INPUT_SPREAD = 2.0
"""A stage's scanned input is skewed when its largest file is above this multiple of the median file."""
MAX_SPREAD = 2.0
"""The largest predicted scan task may hold at most this multiple of the median one."""
HOT_FILE_WAVES = 2
"""A file holding more than one slot's share of a skewed input is read by at least this many waves of tasks."""


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
    (:func:`~airflow_provider_finegrained.planning.scan_splits.producer_row_group_bytes`). A known size
    also keeps every split at least one row group (or the largest file), since a smaller one only adds
    tasks that read nothing.
    ``cores``: the application's cores, Spark's default ``minPartitionNum`` (None: 1); Spark cuts a scan
    below the split when its bytes over the cores are smaller. ``slots``: the tasks that run at once
    (None: ``cores``). The split is that of the fewest whole waves over the slots whose predicted tasks
    keep max/median at most 2, at the least predicted cost (see the module's docstring).
    """
    _check_arguments(file_bytes, parallelism, row_group_bytes)
    sizes = tuple(int(b) for b in file_bytes if b > 0)
    if not sizes:
        return None
    scan = scan_facts(sizes, parallelism, row_group_bytes, cores, slots)
    decided = plan_split(scan, scan.finest)
    hot = _holds_hot_key(scan)
    coarsest = _coarsest_split(scan, hot)
    chosen = _cheapest_even([decided, *candidate_plans(scan, coarsest)])
    return InputBalance(
        max_partition_bytes=chosen.split,
        open_cost_bytes=chosen.open_cost,
        cores=scan.cores,
        row_group_bytes=scan.row_group_bytes,
        file_count=len(sizes),
        file_bytes=(min(sizes), scan.median, scan.largest),
        task_bytes=chosen.tasks,
        default_task_bytes=spark_default_tasks(scan),
        why=_why(scan, decided, chosen, hot, coarsest),
        slots=scan.slots,
        decided_task_bytes=decided.tasks,
    )


def _check_arguments(file_bytes: Sequence[int], parallelism: int, row_group_bytes: int | None) -> None:
    if isinstance(parallelism, bool) or not isinstance(parallelism, int) or parallelism < 1:
        raise ValueError(f"parallelism must be an integer >= 1, got {parallelism!r}")
    check_file_sizes(file_bytes)
    if row_group_bytes is not None and row_group_bytes < 1:
        raise ValueError(f"row_group_bytes must be >= 1, got {row_group_bytes}")


def _holds_hot_key(scan: ScanFacts) -> bool:
    """Whether the largest file is skewed against the median and holds more than one slot's share."""
    return scan.largest > SKEWED_INPUT_SPREAD * scan.median and scan.largest / scan.total > 1 / scan.slots


def _coarsest_split(scan: ScanFacts, hot: bool) -> int:
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


def _cheapest_even(plans: Sequence[SplitPlan]) -> SplitPlan:
    """The least predicted cost among the even plans, the fewest tasks on a tie; if none is even (row groups
    too large to cut), the most even one."""
    even = [p for p in plans if p.spread <= MAX_SPREAD]
    if even:
        return min(even, key=lambda p: (p.cost, len(p.tasks), p.split))
    return min(plans, key=lambda p: (p.spread, p.cost, len(p.tasks)))


def _why(scan: ScanFacts, decided: SplitPlan, chosen: SplitPlan, hot: bool, coarsest: int) -> str:
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


def _split_reason(scan: ScanFacts, decided: SplitPlan, chosen: SplitPlan) -> str:
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
