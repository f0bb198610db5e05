"""One stage's sizing on its region's slots: its memory floor, even waves, and the split of its file scans.

A stage has two sides. Its file scans are split by ``spark.sql.files.maxPartitionBytes`` and
``openCostInBytes``: they follow the bytes on disk (``StageDemand.scan_parallelism``). Its shuffles
are split by ``spark.sql.shuffle.partitions``: they follow the decided parallelism, which a learned
work factor may have moved away from the bytes on disk (a stage that aggregates shuffles far less
than it reads, a join that multiplies rows far more). AQE's advisory size is ``avg_bytes_per_task``
whatever the count, so it needs no correction: AQE measures the real shuffle bytes. The memory floor
applies to both sides (a scan task's rows expand in its map-side buffers and sorts as a reduce
task's do). Tasks fill the slots in even waves (FLIP-370).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_finegrained.planning.balance import decide_balance
from airflow_provider_finegrained.planning.input_balance import InputBalance
from airflow_provider_finegrained.planning.parallelism import _pow2_ceil, _pow2_floor
from airflow_provider_finegrained.planning.resources import ResourceSpec
from airflow_provider_finegrained.planning.scan_packing import SPARK_OPEN_COST_BYTES, spread

MiB = 2**20
MIN_SPLIT_BYTES = 1 * MiB


@dataclass(frozen=True)
class StageDemand:
    """One stage's decided parallelism and what it reads, as input to sizing."""

    stage: str
    parallelism: int
    consumed_bytes: int = 0
    min_parallelism: int = 1
    max_parallelism: int = 2**31 - 1
    memory_fraction: float = 1.0
    """The stage's share of a slot's execution memory (from ``managed_memory_fractions``)."""
    resources: ResourceSpec | None = None
    fixed: bool = False
    """A parallelism the user fixed: sizing leaves it as it is."""
    memory_expansion: float | None = None
    """In-memory bytes per consumed byte for this stage (learned); None: the profile's ``memory_expansion``."""
    input_file_bytes: tuple[int, ...] = ()
    """The measured size of each file the stage scans (committed upstream outputs and external
    inputs, broadcast inputs excluded), in the order recorded."""
    input_row_group_bytes: int | None = None
    """The row-group size of the files it scans, when read from their footers; None: what the provider's
    producers write (:func:`~airflow_provider_finegrained.planning.scan_splits.producer_row_group_bytes`)."""
    scan_parallelism: int | None = None
    """The parallelism its bytes on disk alone give, for the file scans' split size; None: ``parallelism``.
    Differs from ``parallelism`` when a learned work factor corrected the shuffle side only."""
    power_of_two: bool = False
    """Decided with ``normalize="power_of_two"``: sizing keeps it a power of two (the memory floor raises it to
    the next one; even waves, which would leave it, do not apply)."""

    def __post_init__(self) -> None:
        for name in ("parallelism", "scan_parallelism", "input_row_group_bytes"):
            value = getattr(self, name)
            if value is None and name != "parallelism":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"stage {self.stage!r}: {name} must be an integer >= 1, got {value!r}")


@dataclass(frozen=True)
class StageSizing:
    stage: str
    parallelism: int
    """``spark.sql.shuffle.partitions``."""
    requested_parallelism: int
    waves: int
    max_partition_bytes: int
    per_task_memory: int
    memory_floor: int
    tasks_per_executor: tuple[int, int]
    """(fewest, most) tasks an executor runs for this stage with an even spread."""
    notes: tuple[str, ...] = ()
    balance: InputBalance | None = None
    """The scan settings balanced from the measured file sizes (None: the stage scans no files)."""
    scan_parallelism: int = 0
    """The task count the scan split is sized for (``max_partition_bytes``); 0: ``parallelism``."""

    @property
    def scan_tasks(self) -> int:
        """The parallelism the file scans' split size follows."""
        return self.scan_parallelism or self.parallelism

    @property
    def coalesce_floor(self) -> int:
        """The fewest shuffle partitions AQE may coalesce this stage's shuffles into: its memory floor (within
        its parallelism). AQE coalesces towards an advisory size in serialized shuffle bytes, which knows
        nothing of how much larger the rows are in a sort or a hash map; below the floor a task's data no
        longer fits its memory share (measured: history spill, bench/ARCHIVE.md)."""
        return max(1, min(self.memory_floor, self.parallelism))

    @property
    def widest(self) -> int:
        """The larger of the shuffle and scan parallelism: what the executors are sized for."""
        return max(self.parallelism, self.scan_tasks)

    @property
    def input_balance(self) -> Mapping[str, Any] | None:
        """How the stage's file input is spread over its tasks, for the trace (None: no files scanned)."""
        return self.balance.to_dict() if self.balance else None

    def session_conf(self) -> dict[str, str]:
        """Settings that change per stage inside one running session."""
        conf = {
            "spark.sql.shuffle.partitions": str(self.parallelism),
            "spark.sql.files.maxPartitionBytes": str(self.max_partition_bytes),
        }
        if self.balance:
            conf.update(self.balance.session_conf())
        return conf


@dataclass(frozen=True)
class FlooredStage:
    """One stage's counts after its memory floor, before even waves."""

    parallelism: int
    scan: int
    floor: int
    notes: tuple[str, ...]


def floor_stage(stage: StageDemand, per_task_memory: float, default_expansion: float) -> FlooredStage:
    """Both sides of ``stage`` raised to its memory floor, so one task's data fits its memory share.

    ``default_expansion``: in-memory bytes per consumed byte when the stage has learned none.
    """
    expansion = default_expansion if stage.memory_expansion is None else stage.memory_expansion
    floor = _memory_floor(stage, per_task_memory, expansion)
    parallelism, notes = _raised_to_floor(stage, stage.parallelism, floor, "")
    scan = parallelism
    if stage.scan_parallelism is not None and stage.scan_parallelism != stage.parallelism:
        scan, scan_notes = _raised_to_floor(stage, stage.scan_parallelism, floor, "scan ")
        notes = (*notes, *scan_notes)
    return FlooredStage(parallelism, scan, floor, notes)


def size_stage(
    stage: StageDemand, one: FlooredStage, slots: int, task_cpus: int, used_executors: int, per_task_memory: float
) -> StageSizing:
    """One stage's sizing on the region's slots: even waves (unless fixed or a power of two), its input balance."""
    parallelism, scan, notes = one.parallelism, one.scan, one.notes
    split_differs = scan != parallelism
    if not stage.fixed:
        low = max(stage.min_parallelism, one.floor)
        balanced = even_waves(parallelism, slots, low, stage.max_parallelism)
        if balanced != parallelism and stage.power_of_two:
            # The stated rule wins: a power of two stays one, even if its last wave leaves slots idle.
            notes = (
                *notes,
                f"even waves over {slots} slots not applied ({parallelism} -> {balanced}): "
                f"normalize='power_of_two' keeps {parallelism}",
            )
        elif balanced != parallelism:
            notes = (*notes, f"{parallelism} -> {balanced} for even waves over {slots} slots")
            parallelism = balanced
        if split_differs and not stage.power_of_two:
            scan = even_waves(scan, slots, low, stage.max_parallelism)
        elif not split_differs:
            scan = parallelism
    balance = decide_balance(
        stage.input_file_bytes, scan, row_group_bytes=stage.input_row_group_bytes, cores=slots * task_cpus, slots=slots
    )
    if balance and (
        balance.open_cost_bytes < SPARK_OPEN_COST_BYTES or balance.file_bytes[2] > balance.max_partition_bytes
    ):
        notes = (
            *notes,
            f"input balance: {balance.file_count} files split at {balance.max_partition_bytes} bytes, "
            f"open cost {balance.open_cost_bytes}; predicted task max/median {balance.spread:.2f} "
            f"(Spark's defaults: {spread(balance.default_task_bytes):.2f})",
        )
    max_partition_bytes = balance.max_partition_bytes if balance else split_bytes(stage.consumed_bytes, scan)
    if scan != parallelism:
        notes = (
            *notes,
            f"scan split follows the bytes on disk: spark.sql.files.maxPartitionBytes {max_partition_bytes} "
            f"sized for {scan} tasks; spark.sql.shuffle.partitions {parallelism} from the corrected decision",
        )
    return StageSizing(
        stage=stage.stage,
        parallelism=parallelism,
        requested_parallelism=stage.parallelism,
        waves=math.ceil(parallelism / slots),
        max_partition_bytes=max_partition_bytes,
        per_task_memory=int(per_task_memory * stage.memory_fraction),
        memory_floor=one.floor,
        tasks_per_executor=(parallelism // used_executors, -(-parallelism // used_executors)),
        notes=notes,
        balance=balance,
        scan_parallelism=scan,
    )


def even_waves(parallelism: int, slots: int, low: int = 1, high: int = 2**31 - 1) -> int:
    """Move ``parallelism`` to the nearer multiple of ``slots`` (a tie goes up) within [low, high].

    A parallelism at or below the slot count runs in one wave and stays. Above it, a last wave that
    is partly empty leaves slots idle while stragglers finish, so the count moves to a whole number
    of waves, unless the bounds allow neither multiple.
    """
    if parallelism <= slots or parallelism % slots == 0:
        return parallelism
    down = parallelism - parallelism % slots
    up = down + slots
    prefer = [up, down] if up - parallelism <= parallelism - down else [down, up]
    for candidate in prefer:
        if low <= candidate <= high:
            return candidate
    return parallelism


def split_bytes(consumed_bytes: int, parallelism: int) -> int:
    """The input split size that gives ``parallelism`` tasks over ``consumed_bytes`` (at least 1 MiB)."""
    return max(MIN_SPLIT_BYTES, math.ceil(consumed_bytes / parallelism))


def _raised_to_floor(stage: StageDemand, requested: int, floor: int, side: str) -> tuple[int, tuple[str, ...]]:
    """``requested`` raised to the memory ``floor`` (within ``max_parallelism``) unless the stage is fixed."""
    if stage.fixed or floor <= requested:
        return requested, ()
    raised = max(requested, min(floor, stage.max_parallelism))
    notes: tuple[str, ...] = ()
    if stage.power_of_two:
        # The next power of two at or above the floor, within the largest power of two the max allows.
        raised = max(requested, min(_pow2_ceil(floor), _pow2_floor(stage.max_parallelism)))
        if raised > requested:
            notes = (
                f"memory floor: {side}raised from {requested} to {raised}, the power of two at or above the "
                f"floor {floor} (normalize='power_of_two'), so one task's data fits its memory share",
            )
    elif raised > requested:
        notes = (f"memory floor: {side}raised from {requested} to {raised} so one task's data fits its memory share",)
    if floor > raised:
        above = "the largest power of two within max_parallelism" if stage.power_of_two else "max_parallelism"
        notes = (*notes, f"memory floor {floor} is above {above}; tasks may spill to disk")
    return raised, notes


def _memory_floor(stage: StageDemand, per_task_memory: float, expansion: float) -> int:
    share = per_task_memory * stage.memory_fraction
    if stage.consumed_bytes <= 0 or share <= 0:
        return 1
    return max(1, math.ceil(stage.consumed_bytes * expansion / share))
