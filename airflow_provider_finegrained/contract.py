"""What a stage publishes to XCom: the one contract the operator writes and the UI plugin reads.

Keys (all values are small JSON):

- ``finegrained_output`` (also the task's ``return_value``): the committed output, an
  :class:`OutputRecord`: path (of the ``_COMMITTED`` marker), data path (the committed files' folder),
  format, bytes of each partition, rows, committed, try number.
- ``finegrained_trace``: the decision trace: bytes consumed, config in force, decided parallelism and
  the rule that decided it, executors, cores, memory, memory fraction, region and slot sharing group.
- ``finegrained_region``: on a region's leader, where the region's run keeps its per-stage results.
- ``finegrained_plan``: the DAG's plan as every stage saw it when it started
  (:func:`planning.render.plan_to_dict`: stages, exchanges, regions, slot sharing groups).

Pure Python: no Airflow or Spark imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

OUTPUT_KEY = "finegrained_output"
TRACE_KEY = "finegrained_trace"
REGION_KEY = "finegrained_region"
PLAN_KEY = "finegrained_plan"
CONTRACT_VERSION = 1


class UpstreamOutputError(ValueError):
    """An upstream stage's XCom does not describe a committed output this stage can read."""


@dataclass(frozen=True)
class OutputRecord:
    """A stage's committed output as published in XCom."""

    stage: str
    path: str
    format: str
    partition_bytes: list[int]
    rows: int
    try_number: int
    committed: bool = True
    in_memory_only: bool = False
    """True when the stage handed its output over in memory inside its region and wrote nothing."""
    data_path: str = ""
    """The folder holding exactly the committed files (the committed attempt's), for a reader's own Spark
    or pyarrow code; ``path`` holds the ``_COMMITTED`` marker. Empty for an in-memory handover."""

    @property
    def total_bytes(self) -> int:
        return sum(self.partition_bytes)

    def to_xcom(self) -> dict[str, Any]:
        return {
            "version": CONTRACT_VERSION,
            "stage": self.stage,
            "path": self.path,
            "format": self.format,
            "partition_bytes": list(self.partition_bytes),
            "total_bytes": self.total_bytes,
            "rows": self.rows,
            "try_number": self.try_number,
            "committed": self.committed,
            "in_memory_only": self.in_memory_only,
            "data_path": self.data_path,
        }

    @classmethod
    def from_committed(cls, stage: str, output: Mapping[str, Any] | None, try_number: int) -> OutputRecord:
        """The record of a stage from its committed output (the marker's fields), or an in-memory handover."""
        if output is None:
            return cls(stage, "", "", [], 0, try_number, committed=False, in_memory_only=True)
        path, attempt = str(output["path"]), str(output.get("attempt") or "")
        return cls(
            stage=stage,
            path=path,
            format=str(output["format"]),
            partition_bytes=[int(b) for b in output["partition_bytes"]],
            rows=int(output["rows"]),
            try_number=try_number,
            data_path=f"{path.rstrip('/')}/{attempt}" if attempt else path,
        )

    @classmethod
    def from_xcom(cls, value: Any, *, upstream: str, consumer: str) -> OutputRecord:
        """Validate what an upstream pushed; errors name both stages and say what to do."""
        where = f"stage {consumer!r} reads from {upstream!r}, but"
        if value is None:
            raise UpstreamOutputError(
                f"{where} {upstream!r} published no output (it was skipped, failed, or has not run); "
                f"clear and rerun {upstream!r} first"
            )
        if not isinstance(value, Mapping):
            raise UpstreamOutputError(
                f"{where} its XCom {OUTPUT_KEY!r} is {type(value).__name__}, not an output record"
            )
        missing = sorted({"path", "format", "partition_bytes", "rows", "committed"} - set(value))
        if missing:
            raise UpstreamOutputError(f"{where} its output record lacks {missing}; was it written by this provider?")
        if value.get("in_memory_only"):
            raise UpstreamOutputError(
                f"{where} {upstream!r} handed its output over in memory only; make the exchange pipelined "
                "so both run in one region, or let the upstream write its output"
            )
        if value["committed"] is not True:
            raise UpstreamOutputError(f"{where} its output at {value['path']} was not committed; rerun {upstream!r}")
        sizes = value["partition_bytes"]
        if not isinstance(sizes, list) or not all(isinstance(s, int) and s >= 0 for s in sizes):
            raise UpstreamOutputError(f"{where} its partition_bytes {sizes!r} are not a list of byte counts")
        return cls(
            stage=str(value.get("stage", upstream)),
            path=str(value["path"]),
            format=str(value["format"]),
            partition_bytes=list(sizes),
            rows=int(value["rows"]),
            try_number=int(value.get("try_number", 0)),
            data_path=str(value.get("data_path") or value["path"]),
        )


@dataclass(frozen=True)
class StageTrace:
    """Why a stage ran the way it did; pushed to XCom and printed in the task log.

    Frozen: ``decide_region`` gives the decided part, ``execution.region_trace.stage_trace`` the rest, once.
    """

    stage: str
    region: str
    slot_sharing_group: str
    region_leader: str
    consumed_bytes: dict[str, int] = field(default_factory=dict)
    broadcast_inputs: list[str] = field(default_factory=list)
    config: dict[str, Any] = field(default_factory=dict)
    decided_parallelism: int = 0
    rule: str = ""
    computed_parallelism: int | None = None
    parallelism: int = 0
    """After sizing (memory floor, even waves): what the stage ran with."""
    sizing_notes: list[str] = field(default_factory=list)
    waves: int = 0
    executors: int = 0
    executor_cores: int = 0
    executor_memory: int = 0
    memory_overhead: int = 0
    memory_fraction: float = 0.0
    spark_memory_fraction: float = 0.0
    spark_conf: dict[str, str] = field(default_factory=dict)
    application_id: str | None = None
    output_bytes: int | None = None
    output_rows: int | None = None
    started_at: str | None = None
    ended_at: str | None = None
    capacity: dict[str, Any] = field(default_factory=dict)
    """The declarative-resources step: ``outcome`` (as_requested, reduced, waited), what was asked, what
    was free (``message``), ``source`` of the capacity figures and ``waited_s`` when it had to wait."""
    spark_tasks: dict[str, Any] | None = None
    """Spark's own report of the stage's tasks per executor (``runtime.spark_status``)."""
    execution: dict[str, Any] = field(default_factory=dict)
    """How the region reached Spark: ``mode`` (``warm``: a session in the warm pool; ``cold``: an
    application of its own), ``reason``, and for warm runs the ``pool`` URL and the stage's ``session``."""
    runs_in: str | None = None
    """The in-region consumer whose Spark jobs run this stage's plan (an in-memory handover), else None."""
    learned: dict[str, Any] | None = None
    """The expansion learned from the stage's past runs that corrected this decision
    (``planning.expansion.LearnedExpansion.to_dict``), or None when none was used."""
    input_balance: dict[str, Any] | None = None
    """How the stage's file input was balanced over its tasks (split and open-cost sizes, skew
    thresholds, the measured file-size spread) and why, or None when it reads no files."""
    decided_from: dict[str, Any] | None = None
    """What the region's decision read (``execution.decision``): the stage's inputs (upstream partition bytes,
    external file sizes), its settings, the region's cluster profile, forward-group values and the application
    settings the launch added (``launch``); ``finegrained explain`` decides again from it."""
    jvm: dict[str, Any] = field(default_factory=dict)
    """How the application's JVMs started (``spark.jvm_start.jvm_record``): ``jit`` (``c1`` or ``tiered``)
    and its ``reason``, and ``archive``: whether the driver and the executors map the class-data archive.
    Empty for a warm region (the pool's JVMs)."""
    timings: dict[str, float] = field(default_factory=dict)
    """Seconds spent by the provider (inputs_s: XCom, commit checks, measuring; decide_s: planning)
    against Spark (submit_s: the region's spark-submit wall time; spark_stage_s: the stage's own work)."""

    def to_xcom(self) -> dict[str, Any]:
        return {"version": CONTRACT_VERSION, **self.__dict__}

    @classmethod
    def from_xcom(cls, value: Mapping[str, Any]) -> StageTrace:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in value.items() if k in known})
