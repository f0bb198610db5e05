"""Each DAG run's own time (Airflow's metadata database) and its answers against the same scale's first run.

The K runs of a policy are triggered together; each run's time is its ``dag_run`` start to end as Airflow
recorded them. Answers (Q1, Q3, Q5) are read after the policy's runs have ended, outside the timed window:
the provider's from its report (the answer stages' outputs), the dynamic policy's from its output folder.
Every run is compared with the first run of the same entry of ``--scales`` in this invocation.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from bench.lib.answers import Rows, compare_answers, read_rows
from bench.lib.pipeline import ANSWERS


def seconds_between(start: str | None, end: str | None) -> float | None:
    """Seconds between two of Airflow's SQLite timestamps (``2026-11-28 08:30:01.123456[+00:00]``)."""
    if not start or not end:
        return None
    return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()


def run_seconds(airflow_db: Path, dag_id: str, run_ids: Sequence[str]) -> dict[str, float | None]:
    """Each run's start to end as Airflow recorded it (None for a run without both)."""
    url = f"file:{airflow_db}?mode=ro"
    out: dict[str, float | None] = {}
    with contextlib.closing(sqlite3.connect(url, uri=True, timeout=30)) as db:
        for run_id in run_ids:
            row = db.execute(
                "SELECT start_date, end_date FROM dag_run WHERE dag_id = ? AND run_id = ?", (dag_id, run_id)
            ).fetchone()
            out[run_id] = seconds_between(*row) if row else None
    return out


def report_answers(report: Mapping[str, Any]) -> dict[str, Rows]:
    """Q1, Q3 and Q5 from a ``finegrained report --json`` of one run (its answer stages' outputs)."""
    stages = report["stages"]
    return {q: read_rows(stages[stage]["output"]["path"]) for q, (stage, _) in ANSWERS.items() if stage in stages}


def folder_answers(out: Path) -> dict[str, Rows]:
    """Q1, Q3 and Q5 as the dynamic policy wrote them (one folder per stage under ``out``)."""
    return {q: read_rows(out / stage) for q, (stage, _) in ANSWERS.items() if (out / stage).exists()}


class AnswerCheck:
    """The first answers seen for each entry of ``--scales``, and every later run's differences from them."""

    def __init__(self) -> None:
        self.baselines: dict[int, tuple[str, dict[str, Rows]]] = {}

    def check(self, label: str, index: int, read: Callable[[], dict[str, Rows]]) -> dict[str, list[str]]:
        """What differs in run ``index``'s answers (``read`` them; an unreadable answer is a difference) from the
        baseline; {} for the baseline itself. Only queries with differences are listed."""
        try:
            answers = read()
        except Exception as exc:  # a failed run's output may be missing or partial
            return {q: [f"unreadable: {exc}"[:300]] for q in ANSWERS}
        if index not in self.baselines:
            if set(answers) != set(ANSWERS):
                return {q: ["answer missing"] for q in ANSWERS if q not in answers}
            self.baselines[index] = (label, answers)
            return {}
        return {q: diffs for q, diffs in compare_answers(self.baselines[index][1], answers).items() if diffs}

    def baseline_of(self, index: int) -> str | None:
        found = self.baselines.get(index)
        return found[0] if found else None
