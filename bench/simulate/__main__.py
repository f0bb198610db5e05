"""``python -m bench.simulate``: run the simulator's scenarios and write bench/results/simulate.{json,md}.

Commands:

- ``all`` (default): fit the cost model, simulate item 2's shared-cluster setup, the day on the large
  cluster, the same runs arriving within ``--saturated-window-s``, and the closed-loop throughput
  (``--streams`` runs back to back until ``--horizon-s``); validate against
  ``--measured`` if that file exists; write the results files.
- ``shared-cluster``: only item 2's setup (prints JSON).
- ``validate``: compare with item 2's measured file on the loopback model (item 2's 2 physical cores shared
  by everything, Airflow's task starts; background load, executor warm-up and the driver's work per job
  fitted to one policy's makespan, used and reserved core-seconds, the rest held out); prints JSON; exit
  status 1 when not within 20%.
- ``fit``: print the fitted cost model.
- ``month``: issue 33's month replayed at 1,000 nodes (:mod:`bench.simulate.month`): each day of
  ``bench/month/pattern.json``, ``--runs`` TPC-H runs at the day's scale within ``--month-window-s``, the other
  tenants holding ``--tenant-share`` of the cluster, under the month's hand-sized, dynamic and provider
  policies; writes ``simulate-month.{json,md}``, with the month's measured runs compared (as ``month-check``).
- ``month-check``: only that comparison (:mod:`bench.simulate.month_check`): each measured run of
  ``--month-lines`` simulated alone on the loopback YARN, the loopback model fitted to the dynamic runs; prints
  JSON, writes ``simulate-month-check.json``; exit status 1 when a held-out policy is not within 20%.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.simulate.cluster import ClusterSpec
from bench.simulate.costs import RESULTS, CostModel, fit_cost_model
from bench.simulate.loopback import LoopbackModel, fit_loopback
from bench.simulate.month import MONTH_LINES, PATTERN, MonthSpec, read_pattern, repo_path
from bench.simulate.month import document as month_document
from bench.simulate.month_check import check as month_check
from bench.simulate.month_report import markdown as month_markdown
from bench.simulate.policies import POLICIES
from bench.simulate.report import markdown
from bench.simulate.scenarios import (
    CLOSED_LOOP_POLICIES,
    RELEASE_IDLE_TIMEOUT_S,
    SharedClusterSetup,
    closed_loop_scenario,
    scale_scenario,
    shared_cluster,
    validate,
    with_window,
)
from bench.simulate.workload import WorkloadSpec

GiB = 2**30


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command ``argv`` names (``all`` when none): its exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    cost = fit_cost_model(executor_start_s=args.executor_start_s)
    if args.command == "fit":
        print(json.dumps(cost.to_dict(), indent=2))
        return 0
    if args.command == "shared-cluster":
        print(json.dumps(shared_cluster(SharedClusterSetup(), cost, args.policies), indent=2))
        return 0
    loopback = fit_loopback(RESULTS, cost.driver_stage_s)
    if args.command == "month":
        run_month(args, argv, cost, loopback)
        return 0
    if args.command == "month-check":
        outcome = _header(argv) | month_check(args.month_lines, cost, loopback)
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "simulate-month-check.json").write_text(json.dumps(outcome, indent=1) + "\n")
        print(json.dumps(outcome, indent=1))
        return 0 if outcome["agrees"] else 1
    if args.command == "validate":
        pairs = [item.split("=", 1) for item in args.simulate_as]
        if any(len(pair) != 2 for pair in pairs):
            parser.error(f"--simulate-as takes MEASURED=SIMULATED, got {args.simulate_as}")
        outcome = validate(args.measured, cost, loopback, simulate_as=dict(pairs))
        print(json.dumps(outcome, indent=2))
        return 0 if outcome["validated"] else 1
    run_all(args, argv, cost, loopback)
    return 0


def _parser() -> argparse.ArgumentParser:
    """The command line: the command, the large cluster and its workload, the policies, validation's files."""
    parser = argparse.ArgumentParser(prog="python -m bench.simulate", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "command",
        nargs="?",
        default="all",
        choices=["all", "shared-cluster", "validate", "fit", "month", "month-check"],
    )
    parser.add_argument("--runs", type=int, default=10_000, help="the day's runs (month: each day's)")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--node-cores", type=int, default=16)
    parser.add_argument("--node-memory-gib", type=int, default=64)
    parser.add_argument("--window-s", type=float, default=86_400.0)
    parser.add_argument("--saturated-window-s", type=float, default=600.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--policies", nargs="+", default=list(POLICIES), choices=list(POLICIES))
    parser.add_argument("--executor-start-s", type=float, default=3.0)
    parser.add_argument("--measured", type=Path, default=default_measured())
    parser.add_argument("--release-idle-timeout-s", type=float, default=RELEASE_IDLE_TIMEOUT_S)
    parser.add_argument("--min-admit-share", type=float, default=0.0)
    parser.add_argument(
        "--streams",
        type=lambda text: [int(n) for n in text.split(",") if n],
        default=[1000, 4000],
        help="closed loop: comma-separated stream counts (concurrent DAG runs), e.g. 1000,4000; empty skips it",
    )
    parser.add_argument("--horizon-s", type=float, default=1800.0, help="closed loop: runs finished by this time")
    parser.add_argument("--closed-runs", type=int, default=60_000, help="closed loop: the runs the streams draw from")
    parser.add_argument(
        "--simulate-as",
        action="append",
        default=[],
        metavar="MEASURED=SIMULATED",
        help="validate: simulate a measured policy as another (provider=provider+start for a run before 0610101)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    _month_options(parser)
    return parser


def _month_options(parser: argparse.ArgumentParser) -> None:
    """``month``'s own options (it shares --runs, --nodes, the cluster's shape, --seed and --out)."""
    month = parser.add_argument_group("month")
    month.add_argument("--pattern", type=Path, default=PATTERN, help="the month's recorded days")
    month.add_argument("--days", type=int, default=None, help="replay the pattern's first DAYS days (default all)")
    month.add_argument(
        "--month-lines", type=Path, default=MONTH_LINES, help="the month's measured runs, compared with the simulator"
    )
    month.add_argument(
        "--month-window-s",
        type=float,
        default=MonthSpec.window_s,
        help="each day's runs arrive within this many seconds of its start",
    )
    month.add_argument(
        "--tenant-share", type=float, default=MonthSpec.tenant_share, help="executor places the other tenants hold"
    )


def run_month(args: argparse.Namespace, argv: Sequence[str] | None, cost: CostModel, loopback: LoopbackModel) -> None:
    """``month``: replay the recorded month's days on the large cluster, compare the month's measured runs with the
    simulator (``--month-lines``), write simulate-month.{json,md}."""
    started = time.perf_counter()
    spec = MonthSpec(args.runs, args.month_window_s, args.tenant_share, args.seed, args.release_idle_timeout_s)
    header = _header(argv) | {"pattern": repo_path(args.pattern)}
    check = month_check(args.month_lines, cost, loopback)
    doc = month_document(header, read_pattern(args.pattern, args.days), _cluster(args), cost, spec, check)
    doc["wall_s"] = round(time.perf_counter() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "simulate-month.json").write_text(json.dumps(doc, indent=1) + "\n")
    (args.out / "simulate-month.md").write_text(month_markdown(doc))
    print(month_markdown(doc))


def _cluster(args: argparse.Namespace) -> ClusterSpec:
    """The large cluster: ``--nodes`` of ``--node-cores`` and ``--node-memory-gib``; executors of 4 cores, 14 GiB."""
    return ClusterSpec(args.nodes, args.node_cores, args.node_memory_gib * GiB, 4, 14 * GiB)


def _header(argv: Sequence[str] | None) -> dict[str, Any]:
    """What every results file opens with: the command, the machine, the date."""
    return {
        "command": "python -m bench.simulate " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": f"{platform.node()} {platform.platform()}, Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def run_all(args: argparse.Namespace, argv: Sequence[str] | None, cost: CostModel, loopback: LoopbackModel) -> None:
    """``all``: validate where item 2's measured file exists, simulate every scenario, write the results files."""
    started = time.perf_counter()
    cluster = _cluster(args)
    workload = WorkloadSpec(runs=args.runs, window_s=args.window_s)
    results: dict[str, Any] = {
        **_header(argv),
        "validated": False,
        "status": "NOT YET VALIDATED: item 2's measured shared-cluster runs do not exist yet; "
        "no figure below is a finding",
        "cost_model": cost.to_dict(),
    }
    quiet = validations(args.measured, cost, loopback, results) if args.measured.exists() else loopback
    # Item 2's default setup on a quiet machine (no background load): a prediction a quiet run can check.
    setup = SharedClusterSetup()
    results["shared_cluster_mode"] = {
        "setup": setup.__dict__ | {"scales": list(setup.scales)},
        "loopback": quiet.to_dict(),
        "policies": shared_cluster(setup, cost, args.policies, quiet),
    }
    results |= scenarios(args, cost, cluster, workload)
    results["wall_s"] = round(time.perf_counter() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "simulate.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "simulate.md").write_text(markdown(results))
    print(markdown(results))


def validations(measured: Path, cost: CostModel, loopback: LoopbackModel, results: dict[str, Any]) -> LoopbackModel:
    """Validate against ``measured`` (and, for the default file, item 2's earlier and third runs) into
    ``results``, with its verdict and status; the loopback model as fitted, without background load."""
    results["validation"] = validate(measured, cost, loopback)
    results["validation_unshared_cores"] = validate(measured, cost)
    checks = [results["validation"]]
    fitted = results["validation"]["fit"]
    if measured == default_measured() and EARLIER_RUN.exists():
        # The provider's run from before executors came at the first job, simulated as it ran. Its
        # dynamic-allocation run is the current file's, so the fit is the same: the grid is its one point.
        same_fit = {
            "backgrounds": (fitted["background_load"],),
            "warmups": (fitted["executor_warmup_cpu_s"],),
            "driver_jobs": (fitted["driver_job_cpu_s"],),
        }
        results["validation_earlier_run"] = validate(
            EARLIER_RUN, cost, loopback, grid=same_fit, simulate_as=EARLIER_RUN_AS
        )
        checks.append(results["validation_earlier_run"])
    if measured == default_measured() and QUEUE_RUN.exists():
        # A later run with its own dynamic-allocation run, on which it is fitted; both provider policies held out.
        results["validation_queue_run"] = validate(QUEUE_RUN, cost, loopback)
        checks.append(results["validation_queue_run"])
    results["validated"] = all(check["validated"] for check in checks)
    results["status"] = status(checks)
    return replace(loopback, background_load=0.0, executor_warmup_cpu_s=fitted["executor_warmup_cpu_s"])


def scenarios(
    args: argparse.Namespace, cost: CostModel, cluster: ClusterSpec, workload: WorkloadSpec
) -> dict[str, Any]:
    """The day on the large cluster, the same runs arriving within ``--saturated-window-s``, and (with
    ``--streams``) the closed-loop throughput."""
    timeout = args.release_idle_timeout_s
    share = args.min_admit_share
    out = {
        "day": scale_scenario(cluster, cost, workload, args.seed, args.policies, timeout, share),
        "saturated": scale_scenario(
            cluster, cost, with_window(workload, args.saturated_window_s), args.seed, args.policies, timeout, share
        ),
    }
    if args.streams:
        out["closed_loop"] = closed_loop_scenario(
            cluster,
            cost,
            replace(workload, runs=args.closed_runs),
            args.seed,
            args.streams,
            args.horizon_s,
            [p for p in args.policies if p in CLOSED_LOOP_POLICIES],
            timeout,
        )
    return out


EARLIER_RUN = RESULTS / "shared_cluster-executors-at-start" / "shared_cluster.json"
"""Item 2's first full run: its provider asked for every executor at the start (before commit 0610101)."""
EARLIER_RUN_AS = {"provider": "provider+start"}
QUEUE_RUN = RESULTS / "shared_cluster-queue" / "shared_cluster.json"
"""Item 2's third run (45ce720): provider+queue (admission cluster_queue), the provider and dynamic allocation."""


def status(checks: list[dict[str, Any]]) -> str:
    """One line: validated, or which measured figures the simulator misses by more than 20%."""
    misses = [
        f"{Path(check['measured_file']).parent.name}/{policy} {figure} {row['ratio']:.2f}x"
        for check in checks
        for policy, rows in check["comparison"].items()
        for figure, row in rows.items()
        if row["within"] is False
    ]
    files = len(checks)
    if not misses:
        return f"validated against item 2's measured runs ({files} file(s), every figure within 20%)"
    return (
        f"NOT VALIDATED: against {files} measured file(s), the simulator misses by more than 20%: "
        + ", ".join(misses)
        + "; no figure it misses may be quoted"
    )


def default_measured() -> Path:
    """Item 2's results file: the full run's when it exists, else the preliminary one."""
    full = RESULTS / "shared_cluster.json"
    return full if full.exists() else RESULTS / "shared_cluster-preliminary" / "shared_cluster.json"


if __name__ == "__main__":
    raise SystemExit(main())
