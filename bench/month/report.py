"""month.md: the per-day table, the totals and the goal's check, from month.json's document."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.month.results import by_day, failed, slowdowns

MB = 1e6


def _day_rows(lines: Sequence[Mapping[str, Any]], policies: Sequence[str]) -> list[str]:
    days = by_day(lines)
    slow = {p: slowdowns(days, p) for p in policies}
    rows = []
    for date, runs in days.items():
        for policy in policies:
            r = runs.get(policy)
            if r is None:
                continue
            ratio = slow[policy].get(date)
            rows.append(
                f"| {date} | {r.get('weekday', '')} | {r['scale']} | {policy} | {'no' if failed(r) else 'yes'} | "
                f"{float(r['wall_s']):.0f} | {'-' if ratio is None else f'{ratio:.2f}x'} | "
                f"{float(r.get('reserved_core_s') or 0):.0f} | {float(r.get('used_core_s') or 0):.0f} | "
                f"{float(r.get('disk_spilled_bytes') or 0) / MB:.1f} | "
                f"{'yes' if r.get('answers_identical') else 'NO'} |"
            )
    return rows


def _total_rows(totals: Mapping[str, Mapping[str, Any]]) -> list[str]:
    return [
        f"| {p} | {t['days']} | {t['reserved_core_s']:.0f} | {t['used_core_s']:.0f} | {t['wall_s']:.0f} | "
        f"{t['disk_spilled_bytes'] / MB:.1f} | {t['failures']} | {t['wrong_answers']} |"
        for p, t in totals.items()
    ]


def _goal_lines(goal: Mapping[str, Any]) -> list[str]:
    if not goal.get("checked"):
        return [f"Goal not checked: {goal.get('complete_days', 0)} days with every policy measured."]

    def ratio(key: str) -> str:
        value = goal.get(key)
        return "-" if value is None else f"{value:.2f}x"

    lines = [
        f"Over the days every policy ran ({goal['complete_days']}): the provider reserved "
        f"{ratio('provider_reserved_vs_hand')} the hand-sized policy's core-seconds (goal at most 0.75x) and "
        f"{ratio('provider_reserved_vs_dynamic')} dynamic allocation's (goal at most 1x); its slowest day took "
        f"{ratio('provider_slowest_day_vs_best')} that day's best policy's wall time (goal at most 1.1x).",
        "",
    ]
    lines += [f"- {name}: {'met' if ok else '**missed**'}" for name, ok in goal["checks"].items()]
    lines += ["", f"Goal {'met' if goal['met'] else '**missed**'}."]
    return lines


def markdown(doc: Mapping[str, Any]) -> str:
    policies = list(doc["policies"])
    summary = doc["summary"]
    lines = [
        f"`{doc['command']}`",
        "",
        f"Cluster: {doc['cluster']}; the other tenant: {doc['tenant']}.",
        "",
        "| date | day | SF | policy | ok | wall (s) | vs day's best | reserved core-s | used core-s | "
        "disk spill (MB) | answers identical |",
        "|---|---|---:|---|---|---:|---:|---:|---:|---:|---|",
        *_day_rows(doc["lines"], policies),
        "",
        "Totals:",
        "",
        "| policy | days | reserved core-s | used core-s | wall (s) | disk spill (MB) | failures | wrong answers |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
        *_total_rows(summary["totals"]),
        "",
        *_superseded(summary.get("superseded_failures", [])),
        *_goal_lines(summary["goal"]),
    ]
    return "\n".join(lines) + "\n"


def _superseded(failures: Sequence[Mapping[str, Any]]) -> list[str]:
    if not failures:
        return []
    runs = ", ".join(f"{f['policy']} {f['date']}" for f in failures)
    return [
        f"Failed runs measured again (their lines stay in the lines file; the table and totals hold the new "
        f"run): {runs}.",
        "",
    ]
