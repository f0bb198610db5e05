"""Where a stage's decided settings reach Spark: in Spark jobs of its own, or inside an in-region consumer's.

Pure. A stage of a pipelined region whose output only in-region consumers read hands them a lazy
DataFrame and runs no Spark job of its own: Spark plans and runs its transformations when a consumer's
action runs, so under that consumer's session settings (``spark.sql.shuffle.partitions``, the scan settings,
AQE's are read when a query is planned, not when a DataFrame is built). A stage that also writes an output
(an outside consumer, an ``output_path``, or no consumer at all) runs its plan in its own write job,
under its own settings, and its in-region consumers read the persisted result.

So that a lazy producer's decision still reaches Spark, the stage whose jobs run its plan (``runs_in``)
takes the producer's file-scan settings (``spark.sql.files.*``: split size and open cost, balanced from
the producer's measured files) when it scans no files of its own: the only file scans in
its query are the producer's. Its shuffle partitions stay its own; on a forward edge (both of the TPC-H
example's pipelined edges) producer and consumer share one decided parallelism by construction, and
otherwise the trace names both numbers.

Why lazy rather than materialising the handover under the producer's settings first (``persist`` +
``count``, or ``localCheckpoint``): a pipelined edge means no materialisation, as in Flink; the producer's
narrow work fuses with the consumer's, nothing is held in memory, and no extra job runs. Measured in
the archived handover experiment (bench/ARCHIVE.md; figures in docs/benchmarks/handover.md).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

SCAN_PREFIX = "spark.sql.files."
"""Session settings that only file scans read: those of a lazy producer go where its scans run."""


@dataclass(frozen=True)
class SparkReach:
    """How one stage's decision reaches Spark."""

    runs_in: str | None
    """The in-region consumer whose Spark jobs run this stage's plan; None: the stage runs its own jobs."""
    note: str | None
    """A sentence for the trace's sizing notes, None when the stage runs its own jobs."""

    @property
    def notes(self) -> tuple[str, ...]:
        return () if self.note is None else (self.note,)


def runs_own_jobs(in_region: Sequence[str], outside: Sequence[str], output_path: bool = False) -> bool:
    """Whether a stage runs Spark jobs of its own: it writes an output (as ``region_job`` decides).

    ``output_path``: the stage has one, so it is written (and persisted for its in-region readers) even
    when only in-region stages read it.
    """
    return bool(outside) or not in_region or output_path


class _Runners:
    """Which stages' jobs run each stage's plan: itself, or (for a handover) its consumers' runners."""

    def __init__(
        self,
        members: Sequence[str],
        in_region_consumers: Mapping[str, Sequence[str]],
        outside_consumers: Mapping[str, Sequence[str]],
        written: Collection[str] = (),
    ) -> None:
        self.order = {name: i for i, name in enumerate(members)}
        self.consumers = in_region_consumers
        self.lazy = {
            m
            for m in members
            if not runs_own_jobs(in_region_consumers.get(m, ()), outside_consumers.get(m, ()), m in written)
        }
        self._found: dict[str, list[str]] = {}

    def of(self, stage: str) -> list[str]:
        """The stages whose Spark jobs run ``stage``'s plan, in region order (a chain of handovers
        ``a -> b -> c`` runs ``a`` and ``b`` inside ``c``'s jobs)."""
        if stage not in self.lazy:
            return [stage]
        if stage not in self._found:
            found = {r for c in self.consumers[stage] for r in self.of(c)}
            self._found[stage] = sorted(found, key=lambda r: self.order.get(r, len(self.order)))
        return self._found[stage]


def carried_session_conf(
    members: Sequence[str],
    in_region_consumers: Mapping[str, Sequence[str]],
    outside_consumers: Mapping[str, Sequence[str]],
    session_conf: Mapping[str, Mapping[str, str]],
    scans_files: Mapping[str, bool],
    written: Collection[str] = (),
) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """Each stage's session settings as set when it runs, and for each stage that took a handed-over producer's
    scan settings, that producer (whose file scans run in its jobs, so whose balance sets its scan-derived AQE
    sizes).

    A stage that scans no files of its own but runs a lazy producer's plan takes that producer's scan
    settings (``spark.sql.files.*``); with several such producers, the first in region order.
    ``written``: stages with an ``output_path`` (they run their own jobs).
    """
    runners = _Runners(members, in_region_consumers, outside_consumers, written)
    return _effective(runners, members, session_conf, scans_files)


def _effective(
    runners: _Runners,
    members: Sequence[str],
    session_conf: Mapping[str, Mapping[str, str]],
    scans_files: Mapping[str, bool],
) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """The effective settings, and for each runner that took a producer's scan settings, that producer."""
    result = {m: dict(session_conf.get(m, {})) for m in members}
    carried: dict[str, str] = {}
    for producer in members:  # region order: the first scanning producer of a runner is carried
        if producer not in runners.lazy or not scans_files.get(producer, False):
            continue
        for runner in runners.of(producer):
            if scans_files.get(runner, False) or runner in carried:
                continue
            carried[runner] = producer
            result[runner].update(
                {k: v for k, v in session_conf.get(producer, {}).items() if k.startswith(SCAN_PREFIX)}
            )
    return result, carried


def spark_reach(
    members: Sequence[str],
    in_region_consumers: Mapping[str, Sequence[str]],
    outside_consumers: Mapping[str, Sequence[str]],
    session_conf: Mapping[str, Mapping[str, str]],
    bytes_per_task: Mapping[str, int] | None = None,
    scans_files: Mapping[str, bool] | None = None,
    written: Collection[str] = (),
) -> dict[str, SparkReach]:
    """Per stage of a region: whose Spark jobs run its plan, and how its settings compare with theirs.

    ``session_conf``: each stage's per-stage Spark settings as decided (``StageSizing.session_conf``);
    ``bytes_per_task``: each stage's ``avg_bytes_per_task`` (AQE's advisory size when AQE is on);
    ``scans_files``: whether a stage reads files itself (committed or external inputs). A stage whose
    jobs run handed-over plans gets a note too (``runs_in`` stays None for it). ``written``: stages with
    an ``output_path``, written by a job of their own whoever reads them.
    """
    runners = _Runners(members, in_region_consumers, outside_consumers, written)
    effective, carried = _effective(runners, members, session_conf, scans_files or {})
    reach: dict[str, SparkReach] = {}
    for stage in members:
        if stage in runners.lazy:
            found = runners.of(stage)
            own = session_conf.get(stage, {})
            reach[stage] = SparkReach(found[0], _note(own, found, effective, stage, bytes_per_task or {}))
            continue
        hosted = [p for p in members if p in runners.lazy and stage in runners.of(p)]
        note = None
        if hosted:
            note = "its Spark jobs also run the plan of " + ", ".join(repr(p) for p in hosted) + " (in-memory handover)"
            if stage in carried:
                note += f", with {carried[stage]!r}'s scan settings (spark.sql.files.*): the file scans are its"
        reach[stage] = SparkReach(None, note)
    return reach


def _note(
    own: Mapping[str, str],
    runners: Sequence[str],
    effective: Mapping[str, Mapping[str, str]],
    stage: str,
    bytes_per_task: Mapping[str, int],
) -> str:
    where = f"{runners[0]!r}'s" if len(runners) == 1 else "each of " + ", ".join(repr(r) for r in runners) + "'s"
    head = f"in-memory handover: no Spark job of its own; its plan runs inside {where} Spark jobs"
    if len(runners) > 1:
        head += " (once per consumer: the handover is not cached)"
    differences: list[str] = []
    for runner in runners:
        theirs = effective.get(runner, {})
        for key in sorted(set(own) | set(theirs)):
            if own.get(key) != theirs.get(key):
                mine_value, their_value = own.get(key, "unset"), theirs.get(key, "unset")
                differences.append(f"{key} {their_value} from {runner!r}, not its own {mine_value}")
        mine, other = bytes_per_task.get(stage), bytes_per_task.get(runner)
        if mine is not None and other is not None and mine != other:
            differences.append(f"AQE advisory size {other} from {runner!r}, not its own {mine}")
    if not differences:
        shared = ", ".join(f"{k} {v}" for k, v in sorted(own.items()))
        return f"{head}, with its own settings there ({shared}), so its decision reaches Spark"
    return f"{head}, under that stage's settings: " + "; ".join(differences)
