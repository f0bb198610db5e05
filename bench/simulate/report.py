"""The simulator's Markdown report of ``python -m bench simulate``'s results (the JSON file holds everything).

One section each: the cost model, the validations against item 2's measured runs, item 2's setup on a quiet
machine, the day and its saturated variant on the large cluster, and the closed-loop throughput.
"""

from __future__ import annotations

import json
from typing import Any


def markdown(results: dict[str, Any]) -> str:
    """The results as a short Markdown report (the JSON file holds everything)."""
    lines = _cost_section(results)
    if "validation" in results:
        lines += _validation_section(results["validation"], results["validation_unshared_cores"]["comparison"])
    if "validation_earlier_run" in results:
        lines += _earlier_run_section(results["validation_earlier_run"])
    if "validation_queue_run" in results:
        lines += _queue_run_section(results["validation_queue_run"])
    lines += _quiet_section(results["shared_cluster_mode"])
    for key, title in (("day", "The day"), ("saturated", "The same runs arriving at once (saturation)")):
        lines += _scenario_section(title, results[key])
    if "closed_loop" in results:
        lines += _closed_loop(results["closed_loop"])
    return "\n".join(lines) + "\n"


def _cost_section(results: dict[str, Any]) -> list[str]:
    """The title, the status, the command, and the cost model fitted from compare's measurements."""
    cost = results["cost_model"]
    fit = cost["fit"]
    err, cold, warm = fit["error_all"], fit["error_cold"], fit["error_warm"]
    return [
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


def _validation_section(v: dict[str, Any], plain: dict[str, dict[str, Any]]) -> list[str]:
    """The validation against item 2's measured file, beside the unshared-cores model's ratios (``plain``)."""
    lb, fit = v["loopback"], v["fit"]
    lines = [
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
    return lines


def _earlier_run_section(e: dict[str, Any]) -> list[str]:
    """The validation against item 2's earlier run: held out entirely."""
    return _held_out_section(
        "## Validation against item 2's earlier run (held out entirely)",
        f"Measured file: `{e['measured_file']}`, simulated as {e['simulated_as']} (its provider asked for every "
        "executor at the start); the same loopback model and fit (its dynamic-allocation run is the one above).",
        e,
    )


def _queue_run_section(q: dict[str, Any]) -> list[str]:
    """The validation against item 2's third run, fitted on its own dynamic-allocation run."""
    fit = q["fit"]
    return _held_out_section(
        "## Validation against item 2's third run (fitted on its own dynamic-allocation run)",
        f"Measured file: `{q['measured_file']}`; the same loopback model, fitted on this run's "
        f"{fit['policy']}: background load {fit['background_load']:g}, executor warm-up "
        f"{fit['executor_warmup_cpu_s']:g} CPU s, driver per job {fit['driver_job_cpu_s']:g} CPU s. Both provider "
        "policies are held out.",
        q,
    )


def _quiet_section(mode: dict[str, Any]) -> list[str]:
    """Item 2's default setup on a quiet machine: a prediction a quiet run can check."""
    return [
        "## Item 2's default setup on a quiet machine (a prediction, unvalidated)",
        "",
        f"Setup: {json.dumps(mode['setup'])}; loopback model without background load, executor warm-up "
        f"{mode['loopback']['executor_warmup_cpu_s']:g} CPU s.",
        "",
        _table(mode["policies"]),
        "",
    ]


def _scenario_section(title: str, scenario: dict[str, Any]) -> list[str]:
    """One workload on the large cluster: the policies' figures and ratios, where the reserved core-seconds
    went, and the provider's last runs."""
    w, c = scenario["workload"], scenario["cluster"]
    return [
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
