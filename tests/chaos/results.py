"""A harness run's results files: ``<label>.json`` (every observation of every trial) and ``<label>.md`` (the table)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.chaos.outcome import REGION, TrialRecord
from tests.chaos.table import render


def write_results(folder: Path, label: str, context: dict[str, Any], records: Sequence[TrialRecord]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    data = {"context": context, "trials": [record.to_dict() for record in records]}
    (folder / f"{label}.json").write_text(json.dumps(data, indent=1) + "\n")
    (folder / f"{label}.md").write_text(render_results(data))


def render_results(data: dict[str, Any]) -> str:
    """The markdown of a results JSON (also used to re-render without running)."""
    context = data["context"]
    records = [TrialRecord.from_dict(trial) for trial in data["trials"]]
    modes = context.get("modes", ["cold"])
    loads = [r.load_before for r in records if r.load_before is not None]
    lines = [
        f"command: `{context['command']}`",
        f"provider code: {context['provider_code']}",
        f"started {context['started_at']}, ended {context.get('ended_at', '(running)')}",
    ]
    if any(mode != REGION for mode in modes):
        kill_at = " or ".join(str(n) for n in context.get("kill_at_parts", [0]))
        lines.append(
            f"{context['trials_per_mode']} trial(s) per mode; kill {context['kill_delay_s']} s after the slow "
            f"stage's attempt folder appeared with at least {kill_at} part file(s) in it (cycled over the trials); "
            f"{context['expected_rows']} rows in 10 files, {context['row_sleep_s']} s of sleep per row"
        )
    if REGION in modes:
        moments = ", ".join(context.get("region_kill_at", []))
        lines.append(
            f"{context['trials_per_mode']} region trial(s): the stand-in task (tests/chaos/region_task.py) killed "
            f"at {moments} (N: seconds after its start; wN: N s after both Python workers ran; cycled over the "
            "trials)"
        )
    lines.append(
        f"machine: {context['cpus']} cores, 1-min load at the trials' starts {min(loads):.1f}-{max(loads):.1f}"
        if loads
        else f"machine: {context['cpus']} cores"
    )
    return render(records, f"Kill trials: {context['label']}", lines)
