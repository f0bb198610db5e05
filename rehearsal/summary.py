"""The results tables of docs/rehearsal.md, from the outcomes the rehearsal kept (``rehearsal/results``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def trials_table(results: Path) -> str:
    """Per trial: how many runs, how many survived, and the first and last day it ran."""
    rows: dict[str, list[dict[str, Any]]] = {}
    for outcome in _lines(results / "trials.jsonl"):
        rows.setdefault(outcome["trial"], []).append(outcome)
    lines = ["| trial | runs | survived | first run | last run |", "|---|---|---|---|---|"]
    for name, outcomes in sorted(rows.items()):
        survived = sum(bool(o["survived"]) for o in outcomes)
        lines.append(
            f"| `{name}` | {len(outcomes)} | {survived} | {outcomes[0]['at'][:10]} | {outcomes[-1]['at'][:10]} |"
        )
    return "\n".join(lines)


def load_table(results: Path) -> str:
    """Per load level: concurrent runs, what succeeded, runs per hour held, and what it took."""
    lines = [
        "| concurrent runs | succeeded | retried tasks | runs per hour | run median / max (s) | apps at once "
        "| tasks deferred at once | load average (max) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for found in _lines(results / "load.jsonl"):
        level = {key: "n/a" if value is None else value for key, value in found.items()}
        lines.append(
            f"| {level['concurrent']} | {level['succeeded']} | {len(level['retried_tasks'])} | "
            f"{level['runs_per_hour']} | {level['run_s_median']} / {level['run_s_max']} | "
            f"{level['most_applications_at_once']} | {level['most_tasks_deferred_at_once']} | "
            f"{level['load_average_max']} |"
        )
    return "\n".join(lines)
