"""A stage's decision trace as a short table for its task log."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow_provider_finegrained.contract import OutputRecord, StageTrace
from airflow_provider_finegrained.execution.executor_lifecycle import lifecycle_text
from airflow_provider_finegrained.planning.units import format_bytes
from airflow_provider_finegrained.spark.jvm_start import jvm_text

__all__ = ["format_trace"]


def format_trace(trace: StageTrace, record: OutputRecord) -> str:
    """The decision trace as a short table for the task log."""
    consumed = ", ".join(
        f"{name} {format_bytes(size)}" + (" (broadcast)" if name in trace.broadcast_inputs else "")
        for name, size in trace.consumed_bytes.items()
    )
    config = trace.config
    output = (
        "handed over in memory only"
        if record.in_memory_only
        else f"{record.rows} rows, {format_bytes(record.total_bytes)} in {len(record.partition_bytes)} files"
    )
    rows = [
        ("region", f"{trace.region} (slot sharing group {trace.slot_sharing_group}, leader {trace.region_leader})"),
        ("consumed", consumed or "nothing (source)"),
        (
            "config",
            f"min {config.get('min_parallelism')}, max {config.get('max_parallelism')}, "
            f"{format_bytes(config.get('avg_bytes_per_task', 0))} per task, "
            f"broadcast ratio {config.get('max_broadcast_ratio')}",
        ),
        ("decided", f"{trace.decided_parallelism} ({trace.rule}; computed {trace.computed_parallelism})"),
        # What sizing set (shuffle partitions, input split size), not what Spark ran: a source with no input
        # to split (spark.range, a small file) runs as many tasks as its own plan makes; "spark ran" says those.
        (
            "planned",
            f"{trace.parallelism} tasks in {trace.waves} wave(s)"
            + (f"; {'; '.join(trace.sizing_notes)}" if trace.sizing_notes else ""),
        ),
        (
            "executors",
            f"{trace.executors} x {trace.executor_cores} cores, {format_bytes(trace.executor_memory)} "
            f"(+{format_bytes(trace.memory_overhead)} overhead), spark.memory.fraction "
            f"{trace.spark_memory_fraction:.2f}, stage fraction {trace.memory_fraction:.3f}"
            + (f"; {lifecycle}" if (lifecycle := lifecycle_text(trace.spark_conf)) else ""),
        ),
        ("jvm", jvm_text(trace.jvm) or "-"),
        ("capacity", _capacity_line(trace.capacity)),
        ("carrier", _execution_line(trace.execution)),
        ("spark ran", _tasks_line(trace.spark_tasks)),
        ("output", output),
        ("application", trace.application_id or "-"),
    ]
    width = max(len(k) for k, _ in rows)
    return "\n".join([f"Decision trace for stage {trace.stage}:", *(f"  {k.ljust(width)}  {v}" for k, v in rows)])


def _execution_line(execution: Mapping[str, Any]) -> str:
    if not execution:
        return "-"
    if execution.get("mode") == "warm":
        where = f"warm pool {execution.get('pool')}, session {execution.get('session', '-')}"
        return f"{where}: {execution.get('reason', '')}"
    restarted = f"; submitted twice: {execution['restarted']}" if execution.get("restarted") else ""
    return f"an application of its own: {execution.get('reason', '')}{restarted}"


def _capacity_line(capacity: Mapping[str, Any]) -> str:
    if not capacity:
        return "-"
    waited = f" ({capacity['waited_s']:g} s)" if capacity.get("waited_s") else ""
    return f"{capacity.get('outcome')}{waited}: {capacity.get('message')}"


def _tasks_line(spark_tasks: Mapping[str, Any] | None) -> str:
    """Spark's own count of the stage's tasks, and the spread over executors of its widest Spark stage."""
    if not spark_tasks:
        return "- (no task report from Spark)"
    from airflow_provider_finegrained.runtime.spark_status import StageTaskReport, task_spread

    report = StageTaskReport.from_dict(spark_tasks)
    ran = [s for s in report.spark_stages if s.status != "SKIPPED"]
    if not ran:
        return f"no Spark tasks on {len(report.executors)} executor(s)"
    widest = max(ran, key=lambda s: s.tasks)
    fewest, most = task_spread(report, widest)
    return (
        f"{report.total_tasks} tasks in {len(ran)} Spark stage(s) on {len(report.executors)} executor(s); widest "
        f"({widest.tasks} tasks): {fewest}-{most} per executor"
    )
