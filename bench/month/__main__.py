"""A month of changing data: 30 days of the TPC-H pipeline, three policies, a shared cluster (issue 33, item 3).

``python -m bench month [options]``: each day of the recorded pattern (bench/month/pattern.json) is one DAG
run per policy through ``airflow standalone``'s scheduler, the policies alternating per day, on the loopback
YARN (or ``--cluster standalone``) beside another tenant's steady application. Each (policy, day) result is
one line of ``--lines`` as soon as it is known; ``--resume`` skips the ones there. month.json and month.md
are written from the lines after every run (``--report-only`` writes them again).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench.lib.airflow import Standalone
from bench.lib.pipeline import REPO
from bench.lib.report import command_line, machine_info, write_results
from bench.month import pattern
from bench.month.cluster import Size, Tenant, start_target, start_tenant, stop_leftovers, stop_tenant
from bench.month.dags import DAG_IDS
from bench.month.measure import reference_answers
from bench.month.policies import DynamicAllocation, HandSized, Policies, PolicyName, ProviderHistory, day_order, select
from bench.month.report import markdown
from bench.month.results import append_line, done, read_lines, summarize
from bench.month.run import Month, airflow_env, run_one, write_dags
from bench.shared_cluster.policies import Shape

RESULTS = REPO / "bench" / "results"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench month", description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--cluster", choices=("yarn", "standalone"), default="yarn")
    add("--nodes", type=int, default=2, help="NodeManagers (or standalone workers)")
    add("--cores", type=int, default=4, help="vcores (cores) per node")
    add("--memory-mb", type=int, default=6144, help="container memory per node, MiB")
    add("--tenant-cores", type=int, default=Tenant.cores, help="the other tenant's executors (1 core each); 0: none")
    add("--tenant-busy", type=float, default=Tenant.busy, help="the share of the time the tenant's executors work")
    add("--tenant-queue", default=Tenant.queue, help="the tenant's YARN queue")
    add("--policies", default="hand,dynamic,provider")
    add("--first-day", type=int, default=0)
    add("--days", type=int, default=pattern.DAYS, help="how many days from --first-day")
    add("--scales", help="comma-separated scales instead of the pattern's, one per day run (a smoke run)")
    add("--hand-executors", type=int, default=HandSized.executors)
    add("--hand-partitions", type=int, default=HandSized.shuffle_partitions)
    add("--dynamic-max-executors", type=int, default=4)
    add("--history-min-runs", type=int, default=ProviderHistory.history_min_runs)
    add("--resume", action="store_true", help="continue --lines, skipping the (policy, day) pairs there")
    add("--rerun-failed", action="store_true", help="with --resume: run again the pairs whose last line failed")
    add("--report-only", action="store_true", help="write month.json and month.md from --lines, run nothing")
    add("--lines", type=Path, default=RESULTS / "month.jsonl")
    add("--out", type=Path, default=RESULTS)
    add("--work", type=Path, default=Path(tempfile.gettempdir()) / "finegrained-month", help="kept across sessions")
    add("--data", type=Path, default=Path(tempfile.gettempdir()) / "finegrained-bench-data")
    return parser.parse_args(argv)


def policies_of(args: argparse.Namespace) -> Policies:
    return Policies(
        hand=HandSized(executors=args.hand_executors, shuffle_partitions=args.hand_partitions),
        dynamic=DynamicAllocation(Shape(max_executors=args.dynamic_max_executors)),
        provider=ProviderHistory(history_min_runs=args.history_min_runs),
    )


def plan(args: argparse.Namespace, names: tuple[PolicyName, ...]) -> list[tuple[pattern.Day, float, PolicyName]]:
    """(day, scale, policy) in run order: the chosen days, each with its policies in that day's turn."""
    days = pattern.load()[args.first_day : args.first_day + args.days]
    scales = [float(s) for s in args.scales.split(",")] if args.scales else [d.scale for d in days]
    if len(scales) != len(days):
        raise SystemExit(f"--scales gives {len(scales)} scales for {len(days)} days")
    return [(d, s, p) for d, s in zip(days, scales, strict=True) for p in day_order(names, d.index)]


def remaining(
    todo: Sequence[tuple[pattern.Day, float, PolicyName]], measured: set[tuple[str, str]]
) -> list[tuple[pattern.Day, float, PolicyName]]:
    """``todo`` without the (policy, date) pairs already measured (``--resume``), in its order."""
    return [(d, s, p) for d, s, p in todo if (p, d.date) not in measured]


def document(args: argparse.Namespace, argv: Sequence[str] | None, names: Sequence[str]) -> dict[str, Any]:
    lines = read_lines(args.lines)
    size = f"{args.nodes} x {args.cores} cores, {args.memory_mb} MiB"
    return {
        "command": command_line("month", argv),
        "cluster": f"loopback {args.cluster}, {size}",
        "tenant": f"{args.tenant_cores} executor(s) of 1 core, busy {args.tenant_busy:.0%} of the time"
        + (f", YARN queue {args.tenant_queue}" if args.cluster == "yarn" else ""),
        "policies": {name: asdict(policies_of(args)).get(name) for name in names},
        "pattern": str(pattern.PATTERN_FILE.relative_to(REPO)),
        "scales_overridden": bool(args.scales),
        "machine": machine_info(),
        "lines_file": str(args.lines),
        "lines": lines,
        "summary": summarize(lines, names),
    }


def write_report(args: argparse.Namespace, argv: Sequence[str] | None, names: Sequence[str]) -> None:
    doc = document(args, argv, names)
    write_results(args.out / "month.json", doc, markdown(doc), indent=1)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    names = select(args.policies)
    if args.report_only:
        write_report(args, argv, names)
        return 0
    if args.lines.exists() and not args.resume:
        raise SystemExit(f"{args.lines} exists: pass --resume to continue it, or move it away")
    measured = done(read_lines(args.lines), args.rerun_failed)
    todo = remaining(plan(args, names), measured)
    print(f"{len(todo)} runs to go ({len(measured)} already in {args.lines})", flush=True)
    if todo:
        run_session(args, argv, names, todo)
    write_report(args, argv, names)
    return 0


def run_session(
    args: argparse.Namespace,
    argv: Sequence[str] | None,
    names: Sequence[str],
    todo: list[tuple[pattern.Day, float, PolicyName]],
) -> None:
    """Start the cluster, the tenant and Airflow; run ``todo`` in order; stop them all, whatever happens."""
    # The JVMs start as users start them: not with the test suite's class archive and C1 (tests/jvm_start.py),
    # which a shell that ran the tests may still export; each line records what its JVMs had.
    os.environ.pop("JAVA_TOOL_OPTIONS", None)
    args.work.mkdir(parents=True, exist_ok=True)
    home = args.work / f"airflow-{int(time.time())}"
    size = Size(args.nodes, args.cores, args.memory_mb)
    target = start_target(args.cluster, args.work / f"{args.cluster}-cluster", size)
    tenant = None
    try:
        tenant_spec = Tenant(args.tenant_cores, args.tenant_busy, queue=args.tenant_queue)
        tenant = start_tenant(target, tenant_spec, args.work / "tenant.log")
        month = Month(target, policies_of(args), args.work, args.data, home)
        write_dags(month, dt.date.fromisoformat(pattern.load()[0].date))
        month.standalone = Standalone(home, airflow_env(month))
        try:
            month.standalone.start(timeout_s=900)
            for name in names:
                month.standalone.wait_parsed(DAG_IDS[name])
            for day, scale, policy in todo:
                line = run_one(month, policy, day, scale, reference_answers)
                append_line(args.lines, line)
                write_report(args, argv, names)
                print(
                    f"{day.date} SF {scale:g} {policy}: {line['state']}, {line['wall_s']:.0f} s, "
                    f"reserved {line['reserved_core_s']:.0f} core-s, used {line['used_core_s']:.0f}, "
                    f"answers {'identical' if line['answers_identical'] else 'DIFFER'}",
                    flush=True,
                )
        finally:
            month.standalone.stop()
            stop_leftovers(args.work / "days")
    finally:
        stop_tenant(tenant)
        target.stop()


if __name__ == "__main__":
    raise SystemExit(main())
