"""``finegrained explain DAG_ID --run-id RUN``: decide a run's regions again from what the run recorded.

Each stage's trace in XCom records the inputs and settings its region was decided from
(``StageTrace.decided_from``); the DAG's plan is in XCom too. ``explain`` decides every region again with the
run's own decision path (``execution.decision``) and prints what it decided next to what the run traced, so
it states exactly what the run decided, and says so when a stage differs.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping
from typing import Any

from airflow_provider_finegrained.cli.report import stage_results
from airflow_provider_finegrained.execution.decision.replay import Explained, redecide_run
from airflow_provider_finegrained.planning.render import plan_from_dict

COMPARED = ("parallelism", "decided_parallelism", "rule", "spark_conf")
"""The fields of a stage's trace that ``explain`` decides again and compares."""


def add_parser(commands: Any) -> None:
    explain = commands.add_parser("explain", help="decide a DAG run's stages again from its recorded inputs")
    explain.add_argument("dag_id")
    explain.add_argument("--run-id", help="a DAG run (default: the latest)")
    explain.add_argument("--json", action="store_true", help="print JSON")
    explain.set_defaults(handler=run)


def explain_results(results: Mapping[str, Mapping[str, Any]]) -> dict[str, Explained]:
    """Each recorded stage decided again, from ``stage_results``'s traces and plan."""
    plan_dict = next((r["plan"] for r in results.values() if r.get("plan")), None)
    if plan_dict is None:
        raise ValueError("the run recorded no plan (finegrained_plan) in XCom: were its stages run by this provider?")
    recorded = {
        stage: result["trace"]["decided_from"]
        for stage, result in results.items()
        if isinstance(result.get("trace"), Mapping) and result["trace"].get("decided_from")
    }
    return redecide_run(plan_from_dict(plan_dict), recorded)


def differences(explained: Explained, trace: Mapping[str, Any]) -> list[str]:
    """The compared fields where the decision made again differs from the stage's trace."""
    again = explained.to_dict()
    return [key for key in COMPARED if again[key] != trace.get(key)]


def run(args: argparse.Namespace) -> int:
    run_id, results = stage_results(args.dag_id, args.run_id)
    explained = explain_results(results)
    if args.json:
        stages = {
            name: {**one.to_dict(), "same_as_run": not differences(one, results[name]["trace"])}
            for name, one in explained.items()
        }
        print(json.dumps({"dag_id": args.dag_id, "run_id": run_id, "stages": stages}, indent=2))
        return 0
    print(format_explained(args.dag_id, run_id, explained, results))
    return 0


def format_explained(
    dag_id: str, run_id: str, explained: Mapping[str, Explained], results: Mapping[str, Mapping[str, Any]]
) -> str:
    """One block per stage: the decision, its notes and its Spark settings; a stage that differs says how."""
    lines = [f"DAG {dag_id}, run {run_id}: each stage decided again from what the run recorded"]
    for name, one in explained.items():
        differ = differences(one, results[name]["trace"])
        same = "same as the run" if not differ else f"DIFFERS from the run in {', '.join(differ)}"
        lines.append(f"\nstage {name} (region {one.region}): {same}")
        lines.append(f"  decided      {one.decided_parallelism} ({one.rule})")
        lines.append(f"  runs with    {one.parallelism}")
        lines.append(f"  jit          {one.jit}")
        lines.extend(f"  note         {note}" for note in one.sizing_notes)
        lines.extend(f"  {key}  {value}" for key, value in one.spark_conf.items())
    missing = [name for name in results if name not in explained]
    if missing:
        lines.append(f"\nnot decided again (no recorded inputs: not run, or run before they were recorded): {missing}")
    return "\n".join(lines)
