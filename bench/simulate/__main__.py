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
from bench.simulate.costs import RESULTS, fit_cost_model
from bench.simulate.loopback import fit_loopback
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
from bench.simulate.sim import POLICIES
from bench.simulate.workload import WorkloadSpec

GiB = 2**30


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.simulate", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", nargs="?", default="all", choices=["all", "shared-cluster", "validate", "fit"])
    parser.add_argument("--runs", type=int, default=10_000)
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
    args = parser.parse_args(argv)

    cost = fit_cost_model(executor_start_s=args.executor_start_s)
    if args.command == "fit":
        print(json.dumps(cost.to_dict(), indent=2))
        return 0
    if args.command == "shared-cluster":
        print(json.dumps(shared_cluster(SharedClusterSetup(), cost, args.policies), indent=2))
        return 0
    loopback = fit_loopback(RESULTS, cost.driver_stage_s)
    if args.command == "validate":
        pairs = [item.split("=", 1) for item in args.simulate_as]
        if any(len(pair) != 2 for pair in pairs):
            parser.error(f"--simulate-as takes MEASURED=SIMULATED, got {args.simulate_as}")
        outcome = validate(args.measured, cost, loopback, simulate_as=dict(pairs))
        print(json.dumps(outcome, indent=2))
        return 0 if outcome["validated"] else 1

    started = time.perf_counter()
    cluster = ClusterSpec(args.nodes, args.node_cores, args.node_memory_gib * GiB, 4, 14 * GiB)
    workload = WorkloadSpec(runs=args.runs, window_s=args.window_s)
    results: dict[str, Any] = {
        "command": "python -m bench.simulate " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": f"{platform.node()} {platform.platform()}, Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "validated": False,
        "status": "NOT YET VALIDATED: item 2's measured shared-cluster runs do not exist yet; "
        "no figure below is a finding",
        "cost_model": cost.to_dict(),
    }
    quiet = loopback
    if args.measured.exists():
        results["validation"] = validate(args.measured, cost, loopback)
        results["validation_unshared_cores"] = validate(args.measured, cost)
        checks = [results["validation"]]
        fitted = results["validation"]["fit"]
        if args.measured == default_measured() and EARLIER_RUN.exists():
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
        if args.measured == default_measured() and QUEUE_RUN.exists():
            # A later run with its own dynamic-allocation run, on which it is fitted; both provider policies held out.
            results["validation_queue_run"] = validate(QUEUE_RUN, cost, loopback)
            checks.append(results["validation_queue_run"])
        results["validated"] = all(check["validated"] for check in checks)
        results["status"] = status(checks)
        quiet = replace(loopback, background_load=0.0, executor_warmup_cpu_s=fitted["executor_warmup_cpu_s"])
    # Item 2's default setup on a quiet machine (no background load): a prediction a quiet run can check.
    setup = SharedClusterSetup()
    results["shared_cluster_mode"] = {
        "setup": setup.__dict__ | {"scales": list(setup.scales)},
        "loopback": quiet.to_dict(),
        "policies": shared_cluster(setup, cost, args.policies, quiet),
    }
    timeout = args.release_idle_timeout_s
    share = args.min_admit_share
    results["day"] = scale_scenario(cluster, cost, workload, args.seed, args.policies, timeout, share)
    results["saturated"] = scale_scenario(
        cluster, cost, with_window(workload, args.saturated_window_s), args.seed, args.policies, timeout, share
    )
    if args.streams:
        results["closed_loop"] = closed_loop_scenario(
            cluster,
            cost,
            replace(workload, runs=args.closed_runs),
            args.seed,
            args.streams,
            args.horizon_s,
            [p for p in args.policies if p in CLOSED_LOOP_POLICIES],
            timeout,
        )
    results["wall_s"] = round(time.perf_counter() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "simulate.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "simulate.md").write_text(markdown(results))
    print(markdown(results))
    return 0


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


def _held_out_section(title: str, intro: str, check: dict[str, Any]) -> list[str]:
    """A validation's title, what it was checked against, and its table (no unshared-cores column)."""
    return [
        title,
        "",
        intro,
        "",
        "| policy | figure | measured | simulated | ratio | within 20% |",
        "|---|---|---:|---:|---:|---|",
        *(cells for _, _, cells in _validation_rows(check["comparison"])),
        "",
    ]


def _validation_rows(comparison: dict[str, dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(policy, figure, the table row's cells up to "within 20%") for a validation's comparison."""
    out = []
    for policy, rows in comparison.items():
        for figure, row in rows.items():
            ratio = f"{row['ratio']:.2f}" if row["ratio"] is not None else "-"
            within = "fitted" if row["fitted"] else ("-" if row["within"] is None else "yes" if row["within"] else "NO")
            cells = f"| {policy} | {figure} | {row['measured']:.1f} | {row['simulated']:.1f} | {ratio} | {within} |"
            out.append((policy, figure, cells))
    return out


def default_measured() -> Path:
    """Item 2's results file: the full run's when it exists, else the preliminary one."""
    full = RESULTS / "shared_cluster.json"
    return full if full.exists() else RESULTS / "shared_cluster-preliminary" / "shared_cluster.json"


def markdown(results: dict[str, Any]) -> str:
    """The results as a short Markdown report (the JSON file holds everything)."""
    cost = results["cost_model"]
    fit = cost["fit"]
    err, cold, warm = fit["error_all"], fit["error_cold"], fit["error_warm"]
    lines = [
        "# Simulated shared cluster (issue 15 item 3)",
        "",
        f"**Status: {results['status']}.**",
        "",
        f"Command: `{results['command']}`  ",
        f"Machine: {results['machine']}; {results['date']}; simulator wall {results['wall_s']} s."
        + (f" Ran as {results['ran_as']}." if results.get("ran_as") else ""),
        "",
        "## Cost model (fitted from bench/results/compare-stages.csv and compare-runs.csv)",
        "",
        f"- task overhead {cost['task_overhead_s'] * 1000:.1f} ms, throughput {cost['bytes_per_s'] / 2**20:.1f} MiB/s "
        f"per core, fresh-executor warm-up {cost['warmup_s']:.2f} s, application start {cost['app_start_s']:.1f} s "
        f"(per scale {fit['app_start_per_scale_s']}), executor start {cost['executor_start_s']:.1f} s (assumed)",
        f"- fit error (|model - measured| / measured, stage task CPU): median {err['median_abs_rel_error']}, "
        f"p90 {err['p90_abs_rel_error']} over {err['points']} stage medians "
        f"(cold: median {cold['median_abs_rel_error']}, warm: median {warm['median_abs_rel_error']})",
        "",
    ]
    if "validation" in results:
        v = results["validation"]
        lb, fit = v["loopback"], v["fit"]
        plain = results["validation_unshared_cores"]["comparison"]
        lines += [
            "## Validation against item 2",
            "",
            f"Measured file: `{v['measured_file']}`. Loopback model: {lb['physical_cores']:g} physical cores shared "
            f"by every task, JVM start and Airflow task process; application start {lb['app_cpu_s']:.1f} CPU s "
            f"and executor start {lb['executor_cpu_s']:g} CPU s (both measured apart, app-start.json), Airflow "
            f"task {lb['airflow_task_cpu_s']:g} CPU s + {lb['scheduler_delay_s']:g} s scheduler delay (assumed). "
            f"Fitted on {fit['policy']}'s {', '.join(fit['figures'])} (so those are not validation): background "
            f"load {fit['background_load']:g} runnable threads, a fresh executor's first task "
            f"{fit['executor_warmup_cpu_s']:g} CPU s, the driver's work per job {fit['driver_job_cpu_s']:g} CPU s. "
            "Every other figure is held out.",
            "",
            "| policy | figure | measured | simulated | ratio | within 20% | unshared-cores model's ratio |",
            "|---|---|---:|---:|---:|---|---:|",
        ]
        for policy, figure, cells in _validation_rows(v["comparison"]):
            old = plain.get(policy, {}).get(figure, {}).get("ratio")
            lines.append(f"{cells} {'-' if old is None else f'{old:.3f}'} |")
        lines.append("")
    if "validation_earlier_run" in results:
        e = results["validation_earlier_run"]
        lines += _held_out_section(
            "## Validation against item 2's earlier run (held out entirely)",
            f"Measured file: `{e['measured_file']}`, simulated as {e['simulated_as']} (its provider asked for every "
            "executor at the start); the same loopback model and fit (its dynamic-allocation run is the one above).",
            e,
        )
    if "validation_queue_run" in results:
        q = results["validation_queue_run"]
        fit = q["fit"]
        lines += _held_out_section(
            "## Validation against item 2's third run (fitted on its own dynamic-allocation run)",
            f"Measured file: `{q['measured_file']}`; the same loopback model, fitted on this run's "
            f"{fit['policy']}: background load {fit['background_load']:g}, executor warm-up "
            f"{fit['executor_warmup_cpu_s']:g} CPU s, driver per job {fit['driver_job_cpu_s']:g} CPU s. Both provider "
            "policies are held out.",
            q,
        )
    mode = results["shared_cluster_mode"]
    lines += [
        "## Item 2's default setup on a quiet machine (a prediction, unvalidated)",
        "",
        f"Setup: {json.dumps(mode['setup'])}; loopback model without background load, executor warm-up "
        f"{mode['loopback']['executor_warmup_cpu_s']:g} CPU s.",
        "",
        _table(mode["policies"]),
        "",
    ]
    for key, title in (("day", "The day"), ("saturated", "The same runs arriving at once (saturation)")):
        scenario = results[key]
        w, c = scenario["workload"], scenario["cluster"]
        lines += [
            f"## {title} (unvalidated)",
            "",
            f"{w['runs']} runs over {w['window_s']:.0f} s ({w['tpch_share']:.0%} TPC-H, the rest generated DAGs of "
            f"{w['generated_stages'][0]}-{w['generated_stages'][1]} stages), scales log-uniform over "
            f"{w['decades']:g} decades from {w['min_scale']}; {c['nodes']} nodes x {c['node_cores']} cores, "
            f"{c['total_executors']} executors of {c['executor_cores']} cores; seed {scenario['seed']}.",
            "",
            _table(scenario["policies"]),
            "",
            "Ratios: " + ", ".join(f"{k} {v}" for k, v in scenario["ratios"].items()),
            "",
            _breakdown(scenario["policies"]),
            "",
            *_slowest(scenario["policies"]),
        ]
    if "closed_loop" in results:
        lines += _closed_loop(results["closed_loop"])
    return "\n".join(lines) + "\n"


def _closed_loop(scenario: dict[str, Any]) -> list[str]:
    """The closed-loop throughput tables, one per stream count."""
    w, c = scenario["workload"], scenario["cluster"]
    lines = [
        "## Throughput, closed loop (unvalidated)",
        "",
        f"Streams of runs back to back (TPC's throughput test): each stream starts its next run when its last "
        f"ends, drawing in order from {w['runs']} runs of the day's mix; runs finished by "
        f"{scenario['horizon_s']:.0f} s counted; {c['nodes']} nodes, {c['total_executors']} executors of "
        f"{c['executor_cores']} cores; seed {scenario['seed']}.",
        "",
    ]
    for n, block in scenario["streams"].items():
        lines += [f"### {n} streams", "", _table(block["policies"]), ""]
        lines += ["Ratios: " + ", ".join(f"{k} {v}" for k, v in block["ratios"].items()), ""]
    return lines


def _breakdown(policies: dict[str, dict[str, Any]]) -> str:
    """Where each policy's reserved core-seconds went."""
    rows = [
        "| policy | reserved core-s | starting | used | idle while the driver works | idle, no task left |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, r in policies.items():
        b = r["reserved_breakdown_core_s"]
        total = r["reserved_core_s"] or 1.0
        cells = " | ".join(
            f"{b[k]:.0f} ({b[k] / total:.0%})" for k in ("starting", "used", "idle_driver", "idle_no_task")
        )
        rows.append(f"| {name} | {r['reserved_core_s']:.0f} | {cells} |")
    return "\n".join(rows)


def _slowest(policies: dict[str, dict[str, Any]]) -> list[str]:
    """The run that ended last under each provider policy, and how its regions were admitted."""
    lines = []
    for name, r in policies.items():
        if not r.get("slowest_runs") or not name.startswith("provider"):
            continue
        last = r["slowest_runs"][-1]
        regions = ", ".join(
            f"{g[0]} {g[2]}/{g[1]} executors {g[3]:.0f}-{g[4] if g[4] is None else round(g[4])} s"
            for g in last["regions"]
        )
        lines += [
            f"{name}'s last run: {last['shape']} at scale {last['scale']}, arrived {last['arrival']:.0f} s, "
            f"ended {last['finish']:.0f} s; regions admitted/requested: {regions}.",
            "",
        ]
    return lines


def _table(policies: dict[str, dict[str, Any]]) -> str:
    rows = [
        "| policy | makespan (s) | 95% / 99% of runs done (s) | runs/h | queue mean / p95 (s) "
        "| run latency p50 / p95 (s) | reserved core-s "
        "| used core-s | used/reserved | reserved/cluster | applications | tasks | sim wall (s) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, r in policies.items():
        rows.append(
            f"| {name} | {r['makespan_s']:.1f} | {r['finish_p95_s']:.0f} / {r['finish_p99_s']:.0f} | "
            f"{r['throughput_runs_per_h']:.1f} | "
            f"{r['queue_s']['mean']:.1f} / {r['queue_s']['p95']:.1f} | "
            f"{r['run_latency_s']['p50']:.1f} / {r['run_latency_s']['p95']:.1f} | {r['reserved_core_s']:.0f} | "
            f"{r['used_core_s']:.0f} | {r['used_over_reserved']:.3f} | {r['reserved_over_cluster']:.4f} | "
            f"{r['applications']} | {r['tasks']} | {r['wall_s']:.1f} |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    raise SystemExit(main())
