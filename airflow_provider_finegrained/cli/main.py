"""``finegrained plan DAG_FILE`` prints a DAG's parse-time plan; ``finegrained size`` sizes one stage."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from airflow_provider_finegrained.cli import class_archive, cluster, explain, hadoop, report, size, warm


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m airflow_provider_finegrained", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    for add_parser in COMMANDS:
        add_parser(commands)
    return parser


def add_plan_parser(commands: Any) -> None:
    plan = commands.add_parser("plan", help="print the parse-time plan of the stage DAGs in a file or folder")
    plan.add_argument("path", type=Path, help="a DAG file or a folder of DAG files")
    plan.add_argument("--dag-id", help="only this DAG")
    output = plan.add_mutually_exclusive_group()
    output.add_argument("--json", dest="fmt", action="store_const", const="json", help="print JSON")
    output.add_argument("--dot", dest="fmt", action="store_const", const="dot", help="print Graphviz DOT")
    plan.add_argument(
        "--all-sources-in-one-region",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="put every source stage into one region (FLIP-53), or not (--no-...); default: what each DAG "
        "declares with all_sources_in_one_region(dag), as its runs do",
    )
    plan.set_defaults(fmt="table", handler=_plan)


COMMANDS: tuple[Callable[[Any], None], ...] = (
    add_plan_parser,
    size.add_parser,
    report.add_parser,
    explain.add_parser,
    cluster.add_parser,
    hadoop.add_parser,
    warm.add_parser,
    class_archive.add_parser,
)
"""Each adds one command to an ``add_subparsers()`` object; the ``airflow finegrained`` group reuses them."""


def main(argv: Sequence[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Run the command parsed into ``args`` (its ``handler``); bad values print ``error: ...`` and give 2."""
    try:
        return int(args.handler(args))
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _plan(args: argparse.Namespace) -> int:
    from airflow_provider_finegrained.planning import StageGraphError
    from airflow_provider_finegrained.planning.render import plan_to_dict, plan_to_dot, plan_to_table

    if not args.path.exists():
        print(f"error: {args.path} does not exist", file=sys.stderr)
        return 2
    dags, import_errors = _load_dags(args.path)
    for location, error in import_errors.items():
        print(f"error: {location} failed to import:\n{error}", file=sys.stderr)
    if import_errors:
        return 1
    from airflow_provider_finegrained.dags.reader import has_stages, read_dag

    selected = [d for d in dags if args.dag_id in (None, d.dag_id) and has_stages(d)]
    if not selected:
        what = f"DAG {args.dag_id!r} with stages" if args.dag_id else "DAG with stages"
        print(f"error: no {what} in {args.path}", file=sys.stderr)
        return 1
    try:
        plans = [read_dag(d, all_sources_in_one_region=args.all_sources_in_one_region) for d in selected]
    except StageGraphError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.fmt == "json":
        print(json.dumps({p.dag_id: plan_to_dict(p) for p in plans}, indent=2))
    else:
        render = plan_to_dot if args.fmt == "dot" else plan_to_table
        print("\n\n".join(render(p) for p in plans))
    return 0


def _load_dags(path: Path) -> tuple[list[Any], dict[str, str]]:
    # Airflow logs while filling the DagBag; keep stdout for the plan so --json stays parseable.
    with contextlib.redirect_stdout(sys.stderr):
        from airflow.dag_processing.dagbag import DagBag

        bag = DagBag(dag_folder=str(path), safe_mode=False)
    dags = sorted(bag.dags.values(), key=lambda d: d.dag_id)
    return dags, dict(bag.import_errors)
