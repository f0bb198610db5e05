"""simulate-month.md: the month replayed at 1,000 nodes, from simulate-month.json's document."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.simulate.month import POLICIES, SLOWEST
from bench.simulate.month_check import FIGURES

M = 1e6


def markdown(doc: Mapping[str, Any]) -> str:
    """The setup, the per-day table, the totals and the goal's check."""
    return "\n".join([*_setup(doc), *_days(doc["days"]), *_totals(doc["totals"]), *_goal(doc["goal"])]) + "\n"


def _setup(doc: Mapping[str, Any]) -> list[str]:
    spec, cluster, costs = doc["spec"], doc["cluster"], doc["costs"]
    hand = doc["policies"]["hand"]
    return [
        "# The month at 1,000 nodes (issue 33, item 3; simulated, unvalidated)",
        "",
        f"Command: `{doc['command']}`  ",
        f"Machine: {doc['machine']}; {doc['date']}; simulator wall {doc['wall_s']} s.",
        "",
        f"Pattern `{doc['pattern']}`: {len(doc['days'])} days. Each day {spec['runs_per_day']:,} TPC-H runs at the "
        f"day's scale arrive within {spec['window_s']:g} s (seed {spec['seed']}); {cluster['nodes']:,} nodes x "
        f"{cluster['node_cores']} cores, {cluster['total_executors']:,} executors of {cluster['executor_cores']} "
        f"cores, of which the other tenants hold {doc['tenant_executors']:,} all day.",
        "",
        f"Policies: hand = {hand['fixed_executors']} executors per application, {hand['shuffle_partitions']} "
        "shuffle partitions, AQE off; dynamic = Spark's dynamic allocation and AQE; provider = its default "
        f"admission (fit_now). History: {doc['history']}.",
        "",
        f"Costs: {costs['used']} (fit error median {costs['fit_error_median']}). The month's measurements "
        f"(`{costs['month_measurements']}`): {costs['month_note']}.",
        "",
        *_check(costs["month_check"]),
        "Failures and answers are not modelled. The simulator is validated on makespan, not on core-seconds "
        "(docs/simulation.md): the core-second figures below are the model's.",
        "",
    ]


def _check(check: Mapping[str, Any]) -> list[str]:
    """The month's measured runs against the simulator: per policy and figure, simulated / measured (median)."""
    if check.get("agrees") is None:
        return []
    fitted = ", ".join(f"{name} {value:g}" for name, value in check["fitted"].items())
    rows = [
        f"Measured runs simulated one by one (loopback model fitted to the {check['fit_on']} runs: {fitted}; "
        f"RMS log error {check['fit_rms_log_error']}), simulated / measured, median over each policy's runs:",
        "",
        "| policy | runs | wall | executor core-s | used core-s |",
        "|---|---:|---:|---:|---:|",
    ]
    for name, policy in check["policies"].items():
        cells = [
            f"{'**' if not f['agrees'] else ''}{f['median_ratio']:.2f}x{'**' if not f['agrees'] else ''}"
            for f in (policy["figures"].get(key, {"median_ratio": float("nan"), "agrees": False}) for key in FIGURES)
        ]
        label = f"{name} (fitted)" if policy["fitted"] else name
        rows.append(f"| {label} | {policy['runs']} | {' | '.join(cells)} |")
    return [*rows, ""]


def _days(days: Sequence[Mapping[str, Any]]) -> list[str]:
    rows = [
        "| date | day | SF | policy | run p50 / p95 (s) | vs day's best p50 | queue mean (s) | makespan (s) "
        "| reserved core-s | used core-s | reserved/cluster | spilled tasks |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for d in days:
        for name in POLICIES:
            f = d["policies"][name]
            ratio = d["p50_vs_best"][name]
            rows.append(
                f"| {d['date']} | {d['weekday']}{' (spike)' if d['spike'] else ''} | {d['scale']} | {name} | "
                f"{f['run_latency_s']['p50']:.1f} / {f['run_latency_s']['p95']:.1f} | "
                f"{'**' if ratio > SLOWEST else ''}{ratio:.2f}x{'**' if ratio > SLOWEST else ''} | "
                f"{f['queue_s']['mean']:.1f} | {f['makespan_s']:.0f} | {f['reserved_core_s']:,.0f} | "
                f"{f['used_core_s']:,.0f} | {f['reserved_over_cluster']:.3f} | {f['spilled_tasks']} |"
            )
    return [*rows, ""]


def _totals(totals: Mapping[str, Mapping[str, Any]]) -> list[str]:
    rows = [
        "Totals:",
        "",
        "| policy | days | runs | reserved core-s (M) | used core-s (M) | spilled tasks | slowest day's p50 vs best "
        "| applications | tasks | regions that waited for capacity |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, t in totals.items():
        rows.append(
            f"| {name} | {t['days']} | {t['runs']:,.0f} | {t['reserved_core_s'] / M:.2f} | "
            f"{t['used_core_s'] / M:.2f} | {t['spilled_tasks']:.0f} | {t['slowest_day_p50_vs_best']:.2f}x | "
            f"{t['applications']:,.0f} | {t['tasks']:,.0f} | {t['capacity_waits']:,} |"
        )
    return [*rows, ""]


def _goal(goal: Mapping[str, Any]) -> list[str]:
    def ratio(key: str) -> str:
        value = goal.get(key)
        return "-" if value is None else f"{value:.2f}x"

    lines = [
        f"Over {goal['days']} days the provider reserved {ratio('provider_reserved_vs_hand')} the hand-sized "
        f"policy's core-seconds (goal at most 0.75x) and {ratio('provider_reserved_vs_dynamic')} dynamic "
        f"allocation's (goal at most 1x); its slowest day's median run took {ratio('provider_slowest_day_vs_best')} "
        f"that day's best policy's (goal at most {SLOWEST}x)"
        + (f", slower on {', '.join(goal['slow_days'])}." if goal["slow_days"] else "."),
        "",
        *(f"- {name}: {'met' if ok else '**missed**'}" for name, ok in goal["checks"].items()),
        f"- not modelled: {', '.join(goal['not_modelled'])}",
        "",
        f"Goal {'met' if goal['met'] else '**missed**'} in the model.",
    ]
    return lines
