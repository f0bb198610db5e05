"""The skew experiment's summary (medians per variant) and its Markdown report, with the goal's verdict."""

from __future__ import annotations

import statistics
from typing import Any

from bench.lib.stats import SIGNIFICANCE, slower_p_value
from bench.skew.settings import ALL_VARIANTS, MIB, VARIANTS


def ran(runs: list[dict[str, Any]]) -> list[str]:
    """The variants these runs include, in ``ALL_VARIANTS`` order."""
    return [v for v in ALL_VARIANTS if any(r["variant"] == v for r in runs)]


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for variant in ran(runs):
        mine = [r for r in runs if r["variant"] == variant]
        out[variant] = {
            "seconds": round(statistics.median(r["seconds"] for r in mine), 2),
            "scan_max_over_median": statistics.median(r["scan"]["max_over_median"] for r in mine),
            "join_max_over_median": statistics.median(r["join"]["max_over_median"] for r in mine),
            "scan_tasks": statistics.median(r["scan_tasks"] for r in mine),
            "join_tasks": statistics.median(r["join_tasks"] for r in mine),
            **{
                f"{side}_{key}": round(statistics.median(r[f"{side}_timing"][key] for r in mine), 2)
                for side in ("scan", "join")
                for key in ("wall", "task_seconds", "longest_task")
                if all(f"{side}_timing" in r for r in mine)
            },
            "per_task_overhead_ms": _overhead_ms(mine),
            "load_1m": round(statistics.median(r["load_1m"] for r in mine), 2),
            "seconds_range": [min(r["seconds"] for r in mine), max(r["seconds"] for r in mine)],
        }
        predicted = [r["input_balance"].get("predicted_max_over_median") for r in mine if r.get("input_balance")]
        if predicted:
            out[variant]["predicted_scan_max_over_median"] = predicted[0]
    return out


def _overhead_ms(runs: list[dict[str, Any]]) -> float | None:
    """Median per-task deserialization + scheduler delay of the scan stage, in ms (None: not recorded)."""
    values = [
        (r["scan_timing"]["deserialize"] + r["scan_timing"]["scheduler_delay"]) * 1000 / r["scan_tasks"]
        for r in runs
        if "scan_timing" in r and r["scan_tasks"]
    ]
    return round(statistics.median(values), 1) if values else None


def render(result: dict[str, Any]) -> str:
    meta = result["meta"]
    lines = [
        "# Skewed consumer: Spark's defaults, the provider's sizing, and its input balance",
        "",
        f"`{meta['command']}` on {meta['machine']}, {meta['date']}; {meta['reps']} repetitions per variant "
        f"(medians), alternating order, one warm local[2] session; total {meta['wall_s']} s.",
        "",
        f"Data: {meta['rows']:,} fact rows, Zipf join keys (s = {meta['zipf_s']} over {meta['keys']:,} keys: the "
        f"hottest holds {meta['hot_key_share']:.1%} of the rows), written hash-partitioned by the key into "
        f"{meta['files']} files: largest/median file "
        f"{result['data']['default']['largest_over_median']}x (parquet's row groups), "
        f"{result['data']['balance']['largest_over_median']}x (producer row groups "
        f"{meta['producer_write_options']}). avg_bytes_per_task {meta['avg_bytes_per_task'] // MIB} MiB.",
        "",
    ]
    lines += _tables(result["summary"], ran(result["runs"]))
    record = next((r["input_balance"] for r in result["runs"] if r["variant"] == "balance"), None)
    if record and "cost" in record:
        lines += ["", f"Scan balance (`decide_balance`): {record['why']}."]
    adaptive = next((r["adaptive"] for r in result["runs"] if r["variant"] == "balance" and r.get("adaptive")), None)
    if adaptive:
        lines += ["", f"AQE sizes of the balance variant (`decide_adaptive`): {adaptive['why']}."]
    return "\n".join([*lines, *_goal(result["summary"], result["runs"])])


def _tables(s: dict[str, Any], variants: list[str]) -> list[str]:
    """The medians per variant and, where recorded, where the time went."""
    lines = [
        "| variant | stage time (s), median [range] | scan tasks | scan rows max/median | join tasks "
        "| join shuffle-read max/median | load (1 min) |",
        "|---|---|---|---|---|---|---|",
    ]
    for variant in variants:
        v = s[variant]
        predicted = v.get("predicted_scan_max_over_median")
        scan = f"{v['scan_max_over_median']}" + (f" (predicted {predicted})" if predicted is not None else "")
        lines.append(
            f"| {variant} | {v['seconds']} [{v['seconds_range'][0]:.1f}-{v['seconds_range'][1]:.1f}] | "
            f"{v['scan_tasks']:g} | {scan} | {v['join_tasks']:g} | "
            f"{v['join_max_over_median']} | {v['load_1m']} |"
        )
    if not all("scan_wall" in s[v] for v in variants):
        return lines
    lines += [
        "",
        "Where the time went (medians; Spark's status API: stage wall from submission to completion, the "
        "tasks' summed duration, the longest task; per-task overhead = the scan tasks' deserialization plus "
        "scheduler delay over their count):",
        "",
        "| variant | scan wall (s) | scan task-s | longest scan task (s) | join wall (s) | join task-s "
        "| longest join task (s) | per-task overhead (ms) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for variant in variants:
        v = s[variant]
        lines.append(
            f"| {variant} | {v['scan_wall']} | {v['scan_task_seconds']} | {v['scan_longest_task']} | "
            f"{v['join_wall']} | {v['join_task_seconds']} | {v['join_longest_task']} | "
            f"{v['per_task_overhead_ms']} |"
        )
    return lines


def _goal(s: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    """Whether the balance met the goal (max/median <= 2, faster than the baselines that ran), and whether the
    repetitions show each baseline slower beyond chance."""
    compared = [v for v in VARIANTS if v in s]
    if "balance" not in compared or len(compared) < 2:
        return [""]
    b = s["balance"]
    others = [s[v]["seconds"] for v in compared if v != "balance"]
    goal_spread = max(b["scan_max_over_median"], b["join_max_over_median"]) <= 2
    goal_time = b["seconds"] < min(others)
    # A difference smaller than the run-to-run spread of the variants is not a result on a shared machine.
    noise = max(s[v]["seconds_range"][1] - s[v]["seconds_range"][0] for v in compared)
    within_noise = min(others) - b["seconds"] < noise
    lines = [
        "",
        f"Goal max/median <= 2 with the balance: {'met' if goal_spread else 'missed'} "
        f"(scan {b['scan_max_over_median']}, join {b['join_max_over_median']}). "
        f"Faster than {' and '.join(v for v in compared if v != 'balance')}: {'yes' if goal_time else 'no'} "
        f"({b['seconds']} s against "
        f"{', '.join(f'{x} s' for x in others)}; "
        f"{(1 - b['seconds'] / min(others)) * 100:+.0f}% against the faster of them)"
        + (f", within the run-to-run spread of {noise:.1f} s: no clear difference." if within_noise else "."),
        "",
    ]
    samples = {v: [r["seconds"] for r in runs if r["variant"] == v] for v in compared}
    if min(map(len, samples.values())) < 2:
        return lines
    # The repetitions themselves decide: is each baseline slower than the balance, beyond chance?
    tests = {v: slower_p_value(samples[v], samples["balance"]) for v in compared if v != "balance"}
    shown = all(p < SIGNIFICANCE for p in tests.values())
    return [
        *lines,
        "Each baseline slower than the balance (one-sided exact Mann-Whitney over the repetitions): "
        + ", ".join(f"{v} p = {p:.3g}" for v, p in tests.items())
        + f": {'shown' if shown else 'not shown'} at p < {SIGNIFICANCE}.",
        "",
    ]
