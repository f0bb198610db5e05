"""Collect a region's results once its application ended: each stage's status and trace, written once.

The records are those of the stages that succeeded, under the folder's try (the one whose application
committed the output under its fencing token); a failed stage or application is its ``Failed`` outcome.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, Sequence

from airflow_provider_finegrained.contract import OutputRecord, StageTrace
from airflow_provider_finegrained.execution.decision import RegionDecision
from airflow_provider_finegrained.execution.history_store import RegionHistory
from airflow_provider_finegrained.execution.region_context import Succeeded
from airflow_provider_finegrained.execution.region_errors import StageFailedError, not_started, start_failure
from airflow_provider_finegrained.execution.region_folder import RegionFolder
from airflow_provider_finegrained.execution.region_outcome import Failed
from airflow_provider_finegrained.execution.region_trace import RegionRunFacts, launch_record, stage_trace
from airflow_provider_finegrained.launchers.base import LaunchResult, LogLike
from airflow_provider_finegrained.runtime.job import StageStatus
from airflow_provider_finegrained.spark.jvm_start import jvm_record

__all__ = ["collect_region", "failure_of"]


def collect_region(
    region: str,
    members: Sequence[str],
    folder: RegionFolder,
    decision: RegionDecision,
    facts: RegionRunFacts,
    spark_conf: Mapping[str, Mapping[str, str]],
    history: RegionHistory,
    log: LogLike,
    statuses: MutableMapping[str, StageStatus],
) -> Succeeded:
    """Read each member's status (into ``statuses``), write its trace, record the run in the history."""
    records: dict[str, OutputRecord] = {}
    traces: dict[str, StageTrace] = {}
    for member in members:
        status = folder.read_status(member)
        statuses[member] = status or StageStatus(member, "not_run", error="the driver recorded no result")
        launch = launch_record(decision, member, spark_conf[member])
        trace = stage_trace(
            decision.stages[member].trace,
            facts,
            spark_conf[member],
            status,
            first=member == members[0],
            launch=launch,
            jvm=jvm_record(decision.jit, spark_conf[member], warm=facts.carrier.get("mode") == "warm"),
        )
        folder.write_trace(trace)
        traces[member] = trace
        if status and status.state == "success":
            # The folder's try: the one whose application committed the output (under its fencing token).
            records[member] = OutputRecord.from_committed(member, status.output, folder.try_number)
    history.record(traces, {m: s.state == "success" for m, s in statuses.items()})
    if len(records) == len(members):
        # A revoked try may have written on after this try's reset (a warm job, an orphaned driver).
        for location in folder.sweep(list(members)):
            log.info("Region %s: removed %s, left by a superseded try", region, location)
    return Succeeded(records, traces)


def failure_of(
    region: str,
    members: Sequence[str],
    statuses: Mapping[str, StageStatus],
    result: LaunchResult,
    log: LogLike,
    ended: str | None = None,
) -> Failed | None:
    """The region's failure naming the stage that broke, else the application's end when it ended badly;
    None when it ran through."""
    for line in result.diagnostics:
        log.error("%s", line)
    broken = next((s for s in statuses.values() if s.state == "failed"), None)
    if broken is not None:
        return Failed(
            StageFailedError(
                f"region {region} failed in stage {broken.stage!r}: {broken.error}\n{broken.traceback or ''}"
            )
        )
    if not_started(result):
        ended = ended or f"its SparkContext did not start ({start_failure(result)})"
    if result.returncode != 0:
        ended = ended or f"spark-submit exited with code {result.returncode}"
        tail = "\n".join(result.tail[-20:])
        where = "\n".join(result.diagnostics[:5])
        return Failed(
            StageFailedError(
                f"region {region}: {ended} before the stages "
                f"reported (stages {list(members)}); last output lines:\n{tail}" + (f"\n{where}" if where else "")
            )
        )
    return None
