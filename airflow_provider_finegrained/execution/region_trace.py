"""Each stage's trace, built once from the frozen results of a region run. No Airflow imports.

``decide_region`` gives each stage's decided trace (inputs, config, parallelism, sizing); the run adds
how the region reached Spark (carrier), what capacity it got, the Spark settings in force (and which of them
the launch added to the decision's, for ``finegrained explain``), how the application ended and what the
driver recorded for the stage, all in :func:`stage_trace`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from airflow_provider_finegrained.contract import StageTrace
from airflow_provider_finegrained.execution.decision import RegionDecision
from airflow_provider_finegrained.launchers.base import LaunchResult
from airflow_provider_finegrained.runtime.job import StageStatus


@dataclass(frozen=True)
class CapacityRecord:
    """What the capacity step gave the region (``Grant.trace`` or the warm pool's note)."""

    trace: Mapping[str, Any]
    reduced_to_executors: int | None = None
    """Set when the region was sized again on fewer executors than planned."""

    def for_stage(self, waves: int) -> dict[str, Any]:
        trace = dict(self.trace)
        if self.reduced_to_executors is not None:
            # Each stage keeps its data-driven parallelism (its tasks' memory share is unchanged) and runs in
            # more waves on the granted executors.
            trace["message"] = (
                f"{trace.get('message', '')}; sized again on {self.reduced_to_executors} executor(s), "
                f"{waves} wave(s) for this stage"
            )
        return trace


@dataclass(frozen=True)
class RegionRunFacts:
    """What the region run learnt, for every stage's trace."""

    carrier: Mapping[str, Any]
    capacity: CapacityRecord
    timings: Mapping[str, float]
    """Provider-side seconds: inputs_s, decide_s, submit_s."""
    launched_at: float
    """Wall-clock time the application was launched (start latency is measured from it)."""
    launch: LaunchResult


def stage_seconds(status: StageStatus | None) -> dict[str, float]:
    """The stage's own Spark time, from the driver's start and end stamps."""
    if status is None or not status.started_at or not status.ended_at:
        return {}
    started, ended = datetime.fromisoformat(status.started_at), datetime.fromisoformat(status.ended_at)
    return {"spark_stage_s": (ended - started).total_seconds()}


def launch_record(decision: RegionDecision, stage: str, spark_conf: Mapping[str, str]) -> dict[str, Any]:
    """What the launch put around the decision in ``stage``'s Spark settings (``spark_conf``, as traced).

    ``application`` False: the region ran with an application it did not configure (a warm pool's), so its
    settings are the stage's session settings alone. Else ``conf``: the application settings that the
    launcher, the storage, the connection's and the stages' ``spark_conf`` added or changed, and ``dropped``:
    decided ones it left out. With the decision's own, they give ``spark_conf`` again (``finegrained explain``).
    """
    session = decision.stages[stage].session_conf
    if all(key in session for key in spark_conf):
        return {"application": False}
    decided = decision.application_conf
    conf = {k: v for k, v in spark_conf.items() if k not in session and decided.get(k) != v}
    return {"application": True, "conf": conf, "dropped": sorted(k for k in decided if k not in spark_conf)}


def stage_trace(
    decided: StageTrace,
    facts: RegionRunFacts,
    spark_conf: Mapping[str, str],
    status: StageStatus | None,
    *,
    first: bool,
    launch: Mapping[str, Any] | None = None,
    jvm: Mapping[str, Any] | None = None,
) -> StageTrace:
    """The stage's complete trace: its decided trace plus what the run learnt (``first``: the region's first stage;
    ``launch``: what the launch put around the decision in ``spark_conf``, :func:`launch_record`; ``jvm``: how its
    JVMs started, ``spark.jvm_start.jvm_record``)."""
    execution = dict(facts.carrier)
    if decided.stage in facts.launch.sessions:
        execution["session"] = facts.launch.sessions[decided.stage]
    timings = {**facts.timings, **stage_seconds(status)}
    if first and status is not None and status.ready_at:
        # Start latency: from launching the region to its first stage holding a ready session.
        timings["start_s"] = datetime.fromisoformat(status.ready_at).timestamp() - facts.launched_at
    output = status.output if status is not None else None
    return replace(
        decided,
        execution=execution,
        capacity=facts.capacity.for_stage(decided.waves),
        spark_conf=dict(sorted(spark_conf.items())),
        application_id=facts.launch.application_id or (status.application_id if status else None),
        output_bytes=sum(output["partition_bytes"]) if output else None,
        output_rows=output["rows"] if output else None,
        started_at=status.started_at if status else None,
        ended_at=status.ended_at if status else None,
        spark_tasks=status.spark_tasks if status else None,
        timings=timings,
        jvm=dict(jvm or {}),
        # Lists and dicts of the decided trace are copied, so no two traces share a mutable part.
        consumed_bytes=dict(decided.consumed_bytes),
        broadcast_inputs=list(decided.broadcast_inputs),
        config=dict(decided.config),
        sizing_notes=list(decided.sizing_notes),
        decided_from=None if decided.decided_from is None else {**decided.decided_from, "launch": dict(launch or {})},
    )
