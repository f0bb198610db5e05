"""``finegrained report DAG_ID``: what each stage of a DAG run consumed, decided and was planned to run with.

Reads the stages' decision traces and outputs from XCom in the Airflow metadata database, so it
runs where the database is reachable (after ``airflow dags test``, on a scheduler host, ...).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from airflow_provider_finegrained.contract import OUTPUT_KEY, PLAN_KEY, TRACE_KEY
from airflow_provider_finegrained.planning.units import format_bytes


def add_parser(commands: Any) -> None:
    report = commands.add_parser("report", help="print each stage's input bytes, parallelism and Spark settings")
    report.add_argument("dag_id")
    report.add_argument("--run-id", help="a DAG run (default: the latest)")
    report.add_argument("--json", action="store_true", help="print JSON")
    report.set_defaults(handler=run)


def stage_results(dag_id: str, run_id: str | None = None) -> tuple[str, dict[str, dict[str, Any]]]:
    """``(run_id, {stage: {"trace": ..., "output": ..., "plan": ...}})`` from XCom, in the order stages ran."""
    from airflow.models.dagrun import DagRun
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        if run_id is None:
            latest = session.scalars(
                select(DagRun).where(DagRun.dag_id == dag_id).order_by(DagRun.run_after.desc()).limit(1)
            ).first()
            if latest is None:
                raise ValueError(f"DAG {dag_id!r} has no runs")
            run_id = latest.run_id
        results: dict[str, dict[str, Any]] = {}
        for key, field in ((TRACE_KEY, "trace"), (OUTPUT_KEY, "output"), (PLAN_KEY, "plan")):
            rows: list[Any] = list(session.scalars(XComModel.get_many(run_id=run_id, dag_ids=dag_id, key=key)))
            for row in rows:
                results.setdefault(row.task_id, {})[field] = XComModel.deserialize_value(row)
    ordered = dict(sorted(results.items(), key=lambda kv: str(kv[1].get("trace", {}).get("started_at") or "")))
    return run_id, ordered


def run(args: argparse.Namespace) -> int:
    run_id, results = stage_results(args.dag_id, args.run_id)
    if args.json:
        print(json.dumps({"dag_id": args.dag_id, "run_id": run_id, "stages": results}, indent=2, default=str))
        return 0
    print(format_report(args.dag_id, run_id, results))
    return 0


def learned_text(trace: Mapping[str, Any]) -> str:
    """The expansion learned from past runs that corrected a stage's decision, or ``-``."""
    learned = trace.get("learned")
    if not isinstance(learned, Mapping):
        return "-"
    memory = learned.get("memory")
    text = f"work {float(learned['work']):.3g}" + (f", memory {float(memory):.3g}" if memory is not None else "")
    return f"{text} ({learned.get('runs', '?')} runs)"


def format_report(dag_id: str, run_id: str, results: Mapping[str, Mapping[str, Any]]) -> str:
    """The report's table: one row per stage, in the order the stages ran."""
    header = ("stage", "region", "input", "decided", "rule", "learned", "planned", "executors", "memory", "output")
    rows = []
    for stage, result in results.items():
        trace = result.get("trace", {})
        output = result.get("output", {})
        rows.append(
            (
                stage,
                str(trace.get("region", "")),
                format_bytes(sum(trace.get("consumed_bytes", {}).values())),
                str(trace.get("decided_parallelism", "")),
                str(trace.get("rule", "")),
                learned_text(trace),
                f"{trace.get('parallelism', '')} tasks, {trace.get('waves', '')} wave(s)",
                f"{trace.get('executors', '')} x {trace.get('executor_cores', '')} cores",
                f"{format_bytes(trace.get('executor_memory', 0))}, fraction {trace.get('memory_fraction', 0):.2f}",
                "in memory" if output.get("in_memory_only") else format_bytes(output.get("total_bytes", 0)),
            )
        )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [f"DAG {dag_id}, run {run_id}"]
    for row in [header, tuple("-" * w for w in widths), *rows]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return "\n".join(lines)
