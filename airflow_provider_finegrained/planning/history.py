"""Learning a stage's expansion from its past runs. Pure: no Airflow, no Spark, no storage.

What is learned, per stage (``LearnedExpansion``):

- ``work``: the bytes the stage's tasks split per byte it consumes on disk. The decided parallelism
  reaches Spark as ``spark.sql.shuffle.partitions`` (and AQE's advisory size is ``avg_bytes_per_task``),
  so the bytes that parallelism divides are the stage's shuffle bytes, not its parquet bytes. Measured
  as Spark's ``shuffleReadBytes`` of the largest shuffle-reading Spark stage of the stage's jobs, over
  the non-broadcast bytes it consumed, and never below :data:`MIN_WORK`. It corrects the shuffle side
  only: the stage's file splits follow its bytes on disk (``StageDemand.scan_parallelism``). Partial
  aggregation makes the ratio tiny; a shuffle of whole rows (parquet compresses better than Spark's
  shuffle blocks) or a join that multiplies rows makes it larger than 1. A stage that shuffles nothing
  has no such bytes (its file splits already follow its bytes on disk): nothing is learned for it.
- ``memory``: in-memory bytes per consumed byte, for the memory floor. Measured as the largest
  ``peakExecutionMemory`` (summed over a Spark stage's tasks) plus ``memoryBytesSpilled`` (the in-memory
  size of what did not fit) of one Spark stage, over the consumed bytes. Learned only for a stage that
  spilled in one of the runs (or that already decided with it): without a spill the peak is mostly
  Spark's fixed per-task allocations, not a size per byte.

How: the median of the per-run ratios of the last :data:`WINDOW` usable runs (a few outliers move it
little), clamped to [:data:`MIN_FACTOR`, :data:`MAX_FACTOR`] (:data:`MIN_WORK` is the same floor), and moved at
most :data:`MAX_STEP` times away from the factor the previous run used.
Off (None) while fewer than ``min_runs`` runs are usable.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

from airflow_provider_finegrained.planning.expansion import LearnedExpansion

DEFAULT_MIN_RUNS = 3
WINDOW = 10
"""Runs the median is taken over: recent enough to follow a changed stage, enough to outvote outliers."""
MIN_FACTOR = 1 / 64
MAX_FACTOR = 64.0
"""Bounds of a learned factor. Outside them a ratio says more about a mismeasurement (a stage reading data it
does not declare, a tiny input dominated by file footers) than about the stage: at 1/64 a 64 MiB task
would stand for 4 GiB on disk, at 64 a 1 GiB input would need 64 GiB of shuffle."""
MIN_WORK = MIN_FACTOR
"""The work factor's floor. It was 1 while the decided parallelism also set the file split size (a factor of
1/64 made TPC-H Q1 scan 76 MB in one task: 104.9 s instead of 48.2 s at SF 1); the scan now follows the
bytes on disk, so the factor corrects shuffle partitions only and may go as low as the measured ratios go.
Measured (bench/results/history.md): aggregating stages shuffle 1e-5 (Q1) to 1e-2 (Q3's join, Q5's final
aggregation) of their input, and their swept best is 1-2 partitions at SF 0.01-1. At 1/64 such a stage gets
one shuffle partition per 4 GiB on disk (avg_bytes_per_task 64 MiB), and the floor still bounds what one
wrong measurement can take away; the memory floor (learned separately) still guards one task's memory."""
MAX_STEP = 2.0
"""A learned factor moves at most this many times up or down from the one the previous run used."""
MIN_CONSUMED_BYTES = 1
"""A run that consumed nothing has no ratio."""


@dataclass(frozen=True)
class StageRun:
    """What one run of a stage left for learning: its consumed bytes and Spark's measurement of its work."""

    run_id: str
    ended_at: str
    """ISO time the stage ended (orders the runs)."""
    succeeded: bool
    consumed_bytes: int
    """Non-broadcast bytes on disk the stage consumed (what ``work`` multiplies)."""
    shuffle_bytes: int
    """``shuffleReadBytes`` of the largest shuffle-reading Spark stage; 0 when it shuffled nothing."""
    memory_bytes: int
    """Largest ``peakExecutionMemory + memoryBytesSpilled`` of one Spark stage; 0 when Spark reported none."""
    parallelism: int = 0
    spilled_bytes: int = 0
    """``memoryBytesSpilled`` summed over the stage's Spark stages."""
    disk_spilled_bytes: int = 0
    runs_in: str | None = None
    """The in-region consumer whose Spark jobs ran this stage's plan (then it measured nothing of its own)."""
    learned_work: float | None = None
    """The work factor that corrected this run's decision (None: it decided from bytes on disk)."""
    learned_memory: float | None = None
    stage_s: float | None = None

    def ignored_because(self) -> str | None:
        """Why this run teaches nothing, or None when it is usable."""
        if not self.succeeded:
            return "the run failed"
        if self.runs_in is not None:
            return f"it ran in memory inside {self.runs_in}'s Spark jobs"
        if self.consumed_bytes < MIN_CONSUMED_BYTES:
            return "it consumed no bytes"
        if self.shuffle_bytes <= 0:
            return "it shuffled nothing"
        return None

    @property
    def work_ratio(self) -> float:
        return self.shuffle_bytes / self.consumed_bytes if self.consumed_bytes else 0.0

    @property
    def memory_ratio(self) -> float:
        return self.memory_bytes / self.consumed_bytes if self.consumed_bytes else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StageRun:
        """A record as :meth:`to_dict` wrote it; unknown keys (a newer writer's) are left out."""
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


def run_from_trace(trace: Mapping[str, Any], run_id: str, succeeded: bool) -> StageRun:
    """What one run of a stage leaves for learning, from its trace as published (``StageTrace.to_xcom``):
    the non-broadcast consumed bytes and Spark's report in ``spark_tasks`` (``StageTaskReport.to_dict``)."""
    broadcast = set(trace.get("broadcast_inputs") or ())
    consumed = sum(int(v) for k, v in (trace.get("consumed_bytes") or {}).items() if k not in broadcast)
    report: Mapping[str, Any] = trace.get("spark_tasks") or {}
    ran = [s for s in report.get("spark_stages", ()) if s.get("status") == "COMPLETE"]
    learned: Mapping[str, Any] = trace.get("learned") or {}
    timings: Mapping[str, Any] = trace.get("timings") or {}

    def total(name: str) -> int:
        return sum(int(s.get(name, 0)) for s in ran)

    return StageRun(
        run_id=run_id,
        ended_at=str(trace.get("ended_at") or datetime.now(UTC).isoformat()),
        succeeded=succeeded,
        consumed_bytes=consumed,
        shuffle_bytes=max((int(s.get("shuffle_read_bytes", 0)) for s in ran), default=0),
        memory_bytes=max(
            (int(s.get("peak_execution_memory", 0)) + int(s.get("memory_bytes_spilled", 0)) for s in ran), default=0
        ),
        parallelism=int(trace.get("parallelism") or 0),
        spilled_bytes=total("memory_bytes_spilled"),
        disk_spilled_bytes=total("disk_bytes_spilled"),
        runs_in=trace.get("runs_in"),
        # The work factor corrected the decision only when the rule says so (a follower takes its group's value).
        learned_work=learned.get("work") if "learned expansion" in str(trace.get("rule") or "") else None,
        learned_memory=learned.get("memory"),
        stage_s=timings.get("spark_stage_s"),
    )


@dataclass(frozen=True)
class Learning:
    """What the history gave a stage: an expansion, or None and why not."""

    expansion: LearnedExpansion | None
    note: str


def learn_expansion(runs: Sequence[StageRun], min_runs: int = DEFAULT_MIN_RUNS, window: int = WINDOW) -> Learning:
    """The expansion a stage's past ``runs`` (any order) teach; None while fewer than ``min_runs`` are usable."""
    if isinstance(min_runs, bool) or not isinstance(min_runs, int) or min_runs < 1:
        raise ValueError(f"history_min_runs must be an integer >= 1, got {min_runs!r}")
    newest_first = sorted(runs, key=lambda r: r.ended_at, reverse=True)
    usable = [r for r in newest_first if r.ignored_because() is None][:window]
    if len(usable) < min_runs:
        ignored = len(runs) - len([r for r in runs if r.ignored_because() is None])
        why = f"; {ignored} ignored" if ignored else ""
        return Learning(None, f"{len(usable)} usable run(s) of the {min_runs} needed{why}")
    # The factor the latest run decided with bounds the step (the first learned factor is free: it is
    # already the median of min_runs runs).
    previous = newest_first[0]
    work = _bounded(statistics.median(r.work_ratio for r in usable), previous.learned_work, low=MIN_WORK)
    memories = [r.memory_ratio for r in usable if r.memory_bytes > 0]
    memory = None
    if len(memories) >= min_runs and _memory_bound(usable, previous):
        memory = _bounded(statistics.median(memories), previous.learned_memory)
    expansion = LearnedExpansion(work=work, runs=len(usable), memory=memory)
    return Learning(expansion, f"median of {len(usable)} run(s): {expansion.rule}")


def _memory_bound(usable: Sequence[StageRun], previous: StageRun) -> bool:
    """Whether the stage's memory is worth learning: a run in the window spilled, or the newest run
    already decided with a learned memory factor (it keeps the floor that stopped the spill).

    A stage that never spilled had enough memory at every scale it ran, and its peak execution memory is
    then mostly Spark's fixed allocations (a hash map's or a sorter's first pages, per task, whatever its
    data): measured on TPC-H, q3_join's peak stayed at 0.1-0.2 GB from 0.75 MB to 77 MB consumed, so its
    per-byte ratio fell from 134 to 2.8, and a factor learned at small scales raised its parallelism at
    SF 1 from 1 to 4 (swept best 2) for memory a task never needed. The profile's ``memory_expansion``
    stays its floor then."""
    return any(r.spilled_bytes > 0 for r in usable) or previous.learned_memory is not None


def _bounded(value: float, previous: float | None, low: float = MIN_FACTOR) -> float:
    value = min(max(value, low), MAX_FACTOR)
    if previous is not None and previous > 0:
        # The floor wins over the step: a factor used below it (an older harness's) comes back up at once.
        value = max(min(max(value, previous / MAX_STEP), previous * MAX_STEP), low)
    return _three_digits(value)


def _three_digits(value: float) -> float:
    """Rounded to three significant digits: the factor a rule shows is the factor used."""
    digits = 2 - math.floor(math.log10(abs(value)))
    return round(value, digits)
