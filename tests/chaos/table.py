"""The trial matrix as markdown: one summary row per mode, then one row per trial. Pure."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from tests.chaos.outcome import FAILING, LEFTOVER_STAGING, REGION, TrialRecord, classify, passed


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def summary_rows(records: Sequence[TrialRecord]) -> list[list[str]]:
    """Per mode: trials, passed, then the count of each failure class, the median seconds kill-to-end."""
    rows = []
    for mode in dict.fromkeys(record.mode for record in records):
        ours = [record for record in records if record.mode == mode]
        counts = [sum(name in classify(record) for record in ours) for name in (*FAILING, LEFTOVER_STAGING)]
        finish = [record.seconds_to_finish for record in ours if record.seconds_to_finish is not None]
        median = f"{statistics.median(finish):.0f}" if finish else "-"
        rows.append(
            [mode, str(len(ours)), f"{sum(passed(record) for record in ours)}/{len(ours)}"]
            + [str(count) for count in counts]
            + [median]
        )
    return rows


def trial_rows(records: Sequence[TrialRecord]) -> list[list[str]]:
    """Per trial: what was killed, orphans, markers, tries, downstream rows, verdict."""
    rows = []
    for record in records:
        killed = f"{record.killed.role} {record.killed.pid}" if record.killed else "-"
        orphans = ", ".join(sorted({orphan.role for orphan in record.orphans})) or "none"
        if record.orphans:
            orphans = f"{len(record.orphans)}: {orphans}"
        if record.orphan_jobs:
            orphans += f"; jobs {record.orphan_jobs} still running"
        markers = "; ".join(marker.describe() for marker in record.markers) or (
            "-" if record.mode == REGION else "none"
        )
        tries = ", ".join(f"{number}:{state}" for number, state in sorted(record.slow_tries.items())) or "-"
        failures = classify(record)
        verdict = "pass" if passed(record) else "FAIL"
        rows.append(
            [
                record.mode,
                str(record.trial),
                killed,
                orphans,
                markers,
                tries,
                record.run_state or "-",
                "-" if record.downstream_rows is None else str(record.downstream_rows),
                "-" if record.seconds_to_finish is None else f"{record.seconds_to_finish:.0f}",
                f"{verdict}" + (f" ({', '.join(failures)})" if failures else ""),
            ]
        )
    return rows


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """A GitHub markdown table; ``|`` in cells escaped."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


SUMMARY_HEADER = ("mode", "trials", "passed", *FAILING, LEFTOVER_STAGING, "median s kill to end")
TRIAL_HEADER = (
    "mode",
    "#",
    "killed",
    "orphans after 15 s",
    "committed markers of the slow stage",
    "slow stage tries",
    "run",
    "downstream rows",
    "s kill to end",
    "verdict",
)


def render(records: Sequence[TrialRecord], title: str, context: Sequence[str] = ()) -> str:
    """The whole markdown report: title, context lines (command, commit, load), summary and trials."""
    parts = [f"# {title}", ""]
    parts += [f"- {line}" for line in context]
    parts += [
        "",
        markdown_table(SUMMARY_HEADER, summary_rows(records)),
        "",
        markdown_table(TRIAL_HEADER, trial_rows(records)),
        "",
    ]
    notes = [f"- {record.mode} #{record.trial}: {note}" for record in records for note in record.notes]
    if notes:
        parts += ["Notes:", "", *notes, ""]
    return "\n".join(parts)
