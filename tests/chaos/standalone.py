"""``airflow standalone`` for the kill trials: bench's harness (:mod:`bench.lib.airflow`) plus the task instances'
states and tries, read from the metadata database."""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from pathlib import Path

from bench.lib import airflow as harness
from bench.lib.airflow import VENV_BIN, free_port

__all__ = ["VENV_BIN", "Standalone", "airflow_env", "free_port"]


def airflow_env(home: Path, port: int, extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of every Airflow process of a trial: bench's ``airflow standalone`` environment, and this
    process's other ``AIRFLOW*`` settings (the suite's ``[finegrained]`` options), as the trials always ran."""
    env = harness.standalone_env(home, port, extra)
    inherited = {k: v for k, v in os.environ.items() if k.startswith("AIRFLOW") and k not in env}
    return {**inherited, **env}


class Standalone(harness.Standalone):
    """One ``airflow standalone``; also the states of a task's tries."""

    def task(self, dag_id: str, run_id: str, task_id: str) -> tuple[str, str | None, int] | None:
        """(ti id, state, try number) of the task instance now."""
        rows = self._query(
            "SELECT id, state, try_number FROM task_instance WHERE dag_id = ? AND run_id = ? AND task_id = ?",
            (dag_id, run_id, task_id),
        )
        if not rows:
            return None
        ti_id, state, try_number = rows[0]
        # SQLite keeps the UUID as 32 hex digits; process titles show it in its dashed form.
        return str(uuid.UUID(str(ti_id))), None if state is None else str(state), int(str(try_number))

    def tries(self, dag_id: str, run_id: str, task_id: str) -> dict[int, str]:
        """Every try's final state: earlier tries from task_instance_history, the current one from task_instance."""
        found = {
            int(str(number)): str(state)
            for number, state in self._query(
                "SELECT try_number, state FROM task_instance_history WHERE dag_id = ? AND run_id = ? AND task_id = ?",
                (dag_id, run_id, task_id),
            )
        }
        now = self.task(dag_id, run_id, task_id)
        if now is not None and now[2] > 0:
            found[now[2]] = str(now[1])
        return found
