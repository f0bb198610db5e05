"""Turn a region's decisions into the Spark settings of one application and its stages.

A region is one Spark application (its slot sharing group). Its executors take one shape; each
stage keeps its own parallelism (``spark.sql.shuffle.partitions`` and the input split size change
per stage inside a session). Tasks fill the slots in even waves (FLIP-370), and a stage's share of
execution memory puts a floor under its parallelism so that one task's data fits that share.

A stage has two sides. Its file scans are split by ``spark.sql.files.maxPartitionBytes`` and
``openCostInBytes``: they follow the bytes on disk (``StageDemand.scan_parallelism``). Its shuffles
are split by ``spark.sql.shuffle.partitions``: they follow the decided parallelism, which a learned
work factor may have moved away from the bytes on disk (a stage that aggregates shuffles far less
than it reads, a join that multiplies rows far more). AQE's advisory size is ``avg_bytes_per_task``
whatever the count, so it needs no correction: AQE measures the real shuffle bytes. The memory floor
applies to both sides (a scan task's rows expand in its map-side buffers and sorts as a reduce
task's do), and the executors are sized for the wider of the two.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_finegrained.planning.balance import decide_balance
from airflow_provider_finegrained.planning.input_balance import InputBalance
from airflow_provider_finegrained.planning.parallelism import _pow2_ceil, _pow2_floor
from airflow_provider_finegrained.planning.resources import ResourceSpec, check_specs_not_mixed
from airflow_provider_finegrained.planning.scan_packing import SPARK_OPEN_COST_BYTES, spread
from airflow_provider_finegrained.planning.units import parse_bytes

MiB = 2**20
RESERVED_MEMORY = 300 * MiB
"""Spark's reserved system memory per JVM, outside ``spark.memory.fraction``."""
SPARK_DEFAULT_MEMORY_FRACTION = 0.6
MIN_SPLIT_BYTES = 1 * MiB


@dataclass(frozen=True)
class ClusterProfile:
    """What one application may use, and the executor shape for stages without a ResourceSpec.

    ``local`` means Spark local mode: one JVM (the driver) whose threads are the executors, so the
    executor memory becomes ``spark.driver.memory`` and the cores are ``total_cores``.
    """

    total_cores: int
    total_memory: int
    executor_cores: int = 2
    executor_memory: int = 2 * 2**30
    gpus_per_executor: float = 0
    memory_overhead_factor: float = 0.10
    min_memory_overhead: int = 384 * MiB
    memory_expansion: float = 3.0
    """How much larger data is in memory than its bytes on disk (parquet is compressed)."""
    local: bool = False
    gpu_discovery_script: str | None = None
    """``spark.executor.resource.gpu.discoveryScript`` for applications that ask for GPUs (the connection's
    ``gpu_discovery_script``); None: none set here (a ``spark_conf`` may give it)."""

    def __post_init__(self) -> None:
        for name in ("total_memory", "executor_memory", "min_memory_overhead"):
            object.__setattr__(self, name, parse_bytes(getattr(self, name), what=f"cluster {name}"))
        for name in ("total_cores", "executor_cores"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"cluster {name} must be an integer >= 1, got {value!r}")
        if self.executor_memory <= RESERVED_MEMORY:
            raise ValueError(
                f"cluster executor_memory must exceed Spark's reserved {RESERVED_MEMORY // MiB} MiB, "
                f"got {self.executor_memory // MiB} MiB"
            )
        if self.memory_overhead_factor < 0 or self.memory_expansion <= 0 or self.gpus_per_executor < 0:
            raise ValueError("cluster memory_overhead_factor and gpus_per_executor must be >= 0, memory_expansion > 0")


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
        longer fits its memory share (measured: ``bench/history_spill.py``)."""
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
class RegionSizing:
    executor_instances: int
    executor_cores: int
    task_cpus: int
    executor_memory: int
    memory_overhead: int
    memory_fraction: float
    off_heap_memory: int
    executor_gpus: float
    """Whole GPUs per executor (Spark refuses a fraction there)."""
    task_gpus: float
    """GPUs per task: at most 1 (a share of one GPU: ``floor(1 / amount)`` tasks use each) or a whole number."""
    local: bool
    stages: dict[str, StageSizing] = field(default_factory=dict)
    gpu_discovery_script: str | None = None
    """The executors' GPU discovery script, set with the GPU amounts (Spark refuses a script without an amount)."""

    @property
    def slots(self) -> int:
        return self.executor_instances * (self.executor_cores // self.task_cpus)

    def application_conf(self) -> dict[str, str]:
        """Settings fixed when the application starts (executor shape and memory model)."""
        conf = {"spark.memory.fraction": f"{self.memory_fraction:.2f}"}
        if self.local:
            conf["spark.driver.memory"] = f"{self.executor_memory // MiB}m"
        else:
            conf.update(
                {
                    "spark.executor.instances": str(self.executor_instances),
                    "spark.executor.cores": str(self.executor_cores),
                    "spark.executor.memory": f"{self.executor_memory // MiB}m",
                    "spark.executor.memoryOverhead": f"{self.memory_overhead // MiB}m",
                    # Standalone ignores executor.instances; cores.max caps the application instead.
                    "spark.cores.max": str(self.executor_instances * self.executor_cores),
                    "spark.task.cpus": str(self.task_cpus),
                }
            )
        if self.off_heap_memory:
            conf["spark.memory.offHeap.enabled"] = "true"
            conf["spark.memory.offHeap.size"] = f"{math.ceil(self.off_heap_memory / MiB)}m"
        if self.executor_gpus:
            conf["spark.executor.resource.gpu.amount"] = _number(self.executor_gpus)
            conf["spark.task.resource.gpu.amount"] = _number(self.task_gpus)
            if self.gpu_discovery_script and not self.local:
                # An executor finds its GPUs' addresses with it (YARN and Kubernetes tell it none).
                conf["spark.executor.resource.gpu.discoveryScript"] = self.gpu_discovery_script
        return conf


def size_region(stages: Sequence[StageDemand], profile: ClusterProfile) -> RegionSizing:
    """Size one region's Spark application and adjust each stage's parallelism to even waves."""
    if not stages:
        raise ValueError("a region needs at least one stage to size")
    check_specs_not_mixed({s.stage: s.resources for s in stages})
    shape = _executor_shape(stages, profile)
    task_cpus, slots_per_executor = shape.task_cpus, shape.executor_cores // shape.task_cpus
    per_task_memory = (shape.executor_memory - RESERVED_MEMORY) * shape.memory_fraction / slots_per_executor

    sized: dict[str, _Sized] = {}
    for stage in stages:
        expansion = profile.memory_expansion if stage.memory_expansion is None else stage.memory_expansion
        floor = _memory_floor(stage, per_task_memory, expansion)
        parallelism, notes = _raised_to_floor(stage, stage.parallelism, floor, "")
        scan = parallelism
        if stage.scan_parallelism is not None and stage.scan_parallelism != stage.parallelism:
            scan, scan_notes = _raised_to_floor(stage, stage.scan_parallelism, floor, "scan ")
            notes = (*notes, *scan_notes)
        sized[stage.stage] = _Sized(parallelism, scan, floor, notes)

    overhead = max(profile.min_memory_overhead, int(profile.memory_overhead_factor * shape.executor_memory))
    if shape.local:
        executors, max_slots = 1, profile.total_cores // task_cpus
    else:
        by_cores = profile.total_cores // shape.executor_cores
        by_memory = profile.total_memory // (shape.executor_memory + overhead + shape.off_heap)
        if shape.executor_gpus and profile.gpus_per_executor:
            by_cores = min(by_cores, int(profile.gpus_per_executor // shape.executor_gpus) or by_cores)
        fitting = max(1, min(by_cores, by_memory))
        # Executors for the wider side: a stage that scans many splits but shuffles into few
        # partitions (or the reverse) still has that many tasks at once in one of its Spark stages.
        widest = max(max(s.parallelism, s.scan) for s in sized.values())
        executors = max(1, min(fitting, math.ceil(widest / slots_per_executor)))
        max_slots = executors * slots_per_executor
    slots = max(1, max_slots)

    used_executors = executors if not shape.local else 1
    result = {
        stage.stage: _final(stage, sized[stage.stage], slots, task_cpus, used_executors, per_task_memory)
        for stage in stages
    }
    return RegionSizing(
        executor_instances=executors,
        executor_cores=shape.executor_cores,
        task_cpus=task_cpus,
        executor_memory=shape.executor_memory,
        memory_overhead=overhead,
        memory_fraction=shape.memory_fraction,
        off_heap_memory=shape.off_heap,
        executor_gpus=shape.executor_gpus,
        task_gpus=shape.task_gpus,
        local=shape.local,
        stages=result,
        gpu_discovery_script=profile.gpu_discovery_script if shape.executor_gpus else None,
    )


def split_bytes(consumed_bytes: int, parallelism: int) -> int:
    """The input split size that gives ``parallelism`` tasks over ``consumed_bytes`` (at least 1 MiB)."""
    return max(MIN_SPLIT_BYTES, math.ceil(consumed_bytes / parallelism))


def _final(
    stage: StageDemand, one: _Sized, slots: int, task_cpus: int, used_executors: int, per_task_memory: float
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


@dataclass(frozen=True)
class _Sized:
    """One stage's counts after its memory floor, before even waves."""

    parallelism: int
    scan: int
    floor: int
    notes: tuple[str, ...]


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


@dataclass(frozen=True)
class _Shape:
    task_cpus: int
    executor_cores: int
    executor_memory: int
    memory_fraction: float
    off_heap: int
    executor_gpus: float
    task_gpus: float
    local: bool


def _executor_shape(stages: Sequence[StageDemand], profile: ClusterProfile) -> _Shape:
    specs = [s.resources for s in stages if s.resources is not None]
    if not specs:
        cores = profile.total_cores if profile.local else min(profile.executor_cores, profile.total_cores)
        return _Shape(1, cores, profile.executor_memory, SPARK_DEFAULT_MEMORY_FRACTION, 0, 0, 0, profile.local)
    # FLIP-53: a slot of a region serves one parallel instance of every stage, so it asks for the
    # sum of the stages' specs. Spark's unified memory plays the part of Flink's managed memory.
    slot = specs[0]
    for spec in specs[1:]:
        slot = slot + spec
    task_cpus = max(1, math.ceil(slot.cpu_cores))
    if task_cpus > profile.total_cores:
        raise ValueError(
            f"stages {[s.stage for s in stages]} together need {task_cpus} cores per slot, "
            f"but the cluster offers {profile.total_cores}"
        )
    per_executor = profile.total_cores if profile.local else max(profile.executor_cores, task_cpus)
    slots_per_executor = max(1, per_executor // task_cpus)
    on_heap = slot.heap_memory + slot.managed_memory
    fraction = SPARK_DEFAULT_MEMORY_FRACTION
    if slot.managed_memory:
        fraction = min(0.9, max(0.1, slot.managed_memory / on_heap))
    executor_gpus, task_gpus = gpu_amounts(slot.gpus, slots_per_executor)
    return _Shape(
        task_cpus=task_cpus,
        executor_cores=slots_per_executor * task_cpus,
        executor_memory=slots_per_executor * on_heap + RESERVED_MEMORY,
        memory_fraction=fraction,
        off_heap=slots_per_executor * slot.off_heap_memory,
        executor_gpus=executor_gpus,
        task_gpus=task_gpus,
        local=profile.local,
    )


def gpu_amounts(slot_gpus: float, slots_per_executor: int) -> tuple[int, float]:
    """Spark's GPU settings for slots that each need ``slot_gpus``: (whole GPUs per executor, GPUs per task).

    Spark wants a whole number per executor, and per task a share of one GPU (at most 1: ``floor(1 / amount)``
    tasks use each GPU) or a whole number. A share stays as declared and the executor gets enough whole GPUs
    for its slots (0.5 on 2 slots: 1 GPU); above 1 a task's amount is rounded up to whole GPUs.
    """
    if slot_gpus <= 0:
        return 0, 0.0
    if slot_gpus <= 1:
        tasks_per_gpu = max(1, math.floor(1 / slot_gpus))
        return math.ceil(slots_per_executor / tasks_per_gpu), float(slot_gpus)
    whole = math.ceil(slot_gpus)
    return slots_per_executor * whole, float(whole)


def _memory_floor(stage: StageDemand, per_task_memory: float, expansion: float) -> int:
    share = per_task_memory * stage.memory_fraction
    if stage.consumed_bytes <= 0 or share <= 0:
        return 1
    return max(1, math.ceil(stage.consumed_bytes * expansion / share))


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"
