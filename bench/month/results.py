"""The month's results: one JSON line per (policy, day) as soon as it is known, the totals and issue 33's goal.

Pure: reads and writes the lines file and builds the report from the lines alone, so a month run over several
sessions (``--resume``) reports the same as one run through.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

FIGURES: Final = ("reserved_core_s", "used_core_s", "wall_s", "disk_spilled_bytes", "memory_spilled_bytes")
"""What each day's table and the totals sum, per policy."""
SAVING: Final = 0.25
"""The provider's reserved core-seconds at least 25% below the hand-sized policy's."""
SLOWEST: Final = 1.1
"""No day slower than 1.1x that day's best policy."""

Line = dict[str, Any]


def append_line(path: Path, line: Mapping[str, Any]) -> None:
    """One result as one JSON line, flushed (a session stopped later keeps it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        out.write(json.dumps(line, sort_keys=True, default=str) + "\n")
        out.flush()


def read_lines(path: Path) -> list[Line]:
    """Every result line of ``path`` (none when it is missing; a partial last line is skipped)."""
    if not path.is_file():
        return []
    lines = []
    for text in path.read_text().splitlines():
        try:
            lines.append(json.loads(text))
        except ValueError:
            continue
    return lines


def done(lines: Iterable[Mapping[str, Any]], rerun_failed: bool = False) -> set[tuple[str, str]]:
    """The (policy, logical date) pairs already measured: ``--resume`` skips them; with ``rerun_failed``, not those
    whose last line failed (the new line supersedes it; the old one stays in the file and is counted)."""
    return {
        (policy, date)
        for date, runs in by_day(lines).items()
        for policy, line in runs.items()
        if not (rerun_failed and failed(line))
    }


def failed(line: Mapping[str, Any]) -> bool:
    """A run that did not succeed, or an application the cluster manager reports failed."""
    return not line.get("ok") or bool(line.get("failed_applications"))


def spilled(line: Mapping[str, Any]) -> bool:
    return bool(line.get("disk_spilled_bytes") or line.get("memory_spilled_bytes"))


def by_day(lines: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Mapping[str, Any]]]:
    """date -> policy -> its line (the last one, if a day was measured twice)."""
    days: dict[str, dict[str, Mapping[str, Any]]] = {}
    for line in lines:
        days.setdefault(str(line["date"]), {})[str(line["policy"])] = line
    return dict(sorted(days.items()))


def totals(days: Mapping[str, Mapping[str, Mapping[str, Any]]], policies: Sequence[str]) -> dict[str, dict[str, Any]]:
    """Per policy, each figure summed over ``days``, and its failures, spilling days and wrong answers."""
    out: dict[str, dict[str, Any]] = {}
    for policy in policies:
        mine = [d[policy] for d in days.values() if policy in d]
        out[policy] = {key: sum(float(line.get(key) or 0) for line in mine) for key in FIGURES}
        out[policy].update(
            days=len(mine),
            failures=sum(failed(line) for line in mine),
            spilling_days=sum(spilled(line) for line in mine),
            wrong_answers=sum(not line.get("answers_identical") for line in mine),
        )
    return out


def slowdowns(days: Mapping[str, Mapping[str, Mapping[str, Any]]], policy: str) -> dict[str, float]:
    """date -> ``policy``'s wall time over that day's best policy's (successful runs only)."""
    out = {}
    for date, runs in days.items():
        walls = [float(r["wall_s"]) for r in runs.values() if not failed(r)]
        if policy in runs and walls and min(walls) > 0:
            out[date] = float(runs[policy]["wall_s"]) / min(walls)
    return out


def goal(days: Mapping[str, Mapping[str, Mapping[str, Any]]], policies: Sequence[str]) -> dict[str, Any]:
    """Issue 33 item 3's goal over the days every policy ran: the provider at least 25% below the hand-sized
    policy's reserved core-seconds and not above dynamic allocation's; no failure, no spill, no day slower than
    1.1x that day's best; every answer identical to the reference."""
    complete = {d: runs for d, runs in days.items() if all(p in runs for p in policies)}
    if not complete or not {"hand", "dynamic", "provider"} <= set(policies):
        return {"complete_days": len(complete), "checked": False}
    total = totals(complete, policies)
    provider, hand, dynamic = total["provider"], total["hand"], total["dynamic"]
    slow = slowdowns(complete, "provider")
    checks = {
        "reserved_vs_hand": provider["reserved_core_s"] <= (1 - SAVING) * hand["reserved_core_s"],
        "reserved_vs_dynamic": provider["reserved_core_s"] <= dynamic["reserved_core_s"],
        "no_failure": provider["failures"] == 0,
        "no_spill": provider["spilling_days"] == 0,
        "no_day_slower_than_1.1x_best": all(r <= SLOWEST for r in slow.values()),
        "answers_identical": all(total[p]["wrong_answers"] == 0 for p in policies),
    }
    return {
        "complete_days": len(complete),
        "checked": True,
        "provider_reserved_vs_hand": _ratio(provider["reserved_core_s"], hand["reserved_core_s"]),
        "provider_reserved_vs_dynamic": _ratio(provider["reserved_core_s"], dynamic["reserved_core_s"]),
        "provider_slowest_day_vs_best": max(slow.values(), default=None),
        "checks": checks,
        "met": all(checks.values()),
    }


def _ratio(value: float, reference: float) -> float | None:
    return value / reference if reference else None


def summarize(lines: Sequence[Mapping[str, Any]], policies: Sequence[str]) -> dict[str, Any]:
    """What month.json holds besides the lines: the totals over every day measured and the goal's check."""
    days = by_day(lines)
    return {
        "days_measured": len(days),
        "totals": totals(days, policies),
        "goal": goal(days, policies),
        "superseded_failures": superseded_failures(lines),
    }


def superseded_failures(lines: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Failed runs of a (policy, date) measured again later (``--rerun-failed``): not in the totals, never hidden."""
    last = by_day(lines)
    return [
        {"policy": line["policy"], "date": line["date"], "run_id": line.get("run_id")}
        for line in lines
        if failed(line) and last[str(line["date"])][str(line["policy"])] is not line
    ]
