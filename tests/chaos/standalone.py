"""``airflow standalone`` in a home of its own: start once, trigger runs, read states, stop its process group."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Mapping
from pathlib import Path

VENV_BIN = Path(sys.executable).parent
REPO = Path(__file__).resolve().parents[2]
READY_LINE = "Airflow is ready"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def airflow_env(home: Path, port: int, extra: Mapping[str, str]) -> dict[str, str]:
    """The environment of every Airflow process of the harness: its home, a free API port, low parallelism."""
    env = dict(os.environ)
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            "SPARK_LOCAL_IP": "127.0.0.1",
            # A task resumed from deferral parses its DAG file again; at a load of 30 on 2 cores that took over
            # Airflow's 30 s and the task failed with "Dag not found during start up".
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "300",
            # At that load the API server answered a task's start request after 7 to 25 s; Airflow's 5 s
            # client timeout retried it until the task failed ("Duplicate start request received").
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "120",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS": "tests.chaos.sqlite_args.CONNECT_ARGS",
            # Every Airflow process imports the line above from this checkout.
            "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p),
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }
    )
    env.update(extra)
    return env


class Standalone:
    """One ``airflow standalone``, in its own process group, its output in ``<home>/standalone.log``."""

    def __init__(self, home: Path, env: Mapping[str, str]) -> None:
        self.home = home
        self.env = dict(env)
        self.log = home / "standalone.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 240) -> float:
        """Start it and wait until it says it is ready; returns the seconds that took."""
        started = time.monotonic()
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [str(VENV_BIN / "airflow"), "standalone"],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
                cwd=self.home,
            )
        # Its ready banner counts the scheduler, DAG processor and triggerer only; a task whose API server is
        # not up yet fails its try on its own, so the API's health endpoint must answer too.
        while READY_LINE not in self.log.read_text(errors="replace") or not self.api_healthy():
            if self.process.poll() is not None:
                raise RuntimeError(f"airflow standalone exited ({self.process.returncode}); see {self.log}")
            if time.monotonic() - started > timeout_s:
                raise TimeoutError(f"airflow standalone not ready after {timeout_s:.0f} s; see {self.log}")
            time.sleep(1)
        return time.monotonic() - started

    def api_healthy(self) -> bool:
        url = self.env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"].replace("/execution/", "/api/v2/monitor/health")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                return int(response.status) == 200
        except (OSError, ValueError):
            return False

    def stop(self, grace_s: float = 15) -> None:
        """SIGINT (its own clean shutdown), then SIGTERM and SIGKILL to the whole process group."""
        if self.process is None:
            return
        pgid = self.process.pid
        for sig, wait_s in ((signal.SIGINT, grace_s), (signal.SIGTERM, 15), (signal.SIGKILL, 5)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, sig)
            try:
                self.process.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(ProcessLookupError):  # stragglers of the group (executor workers)
            os.killpg(pgid, signal.SIGKILL)
        self.process = None

    def cli(self, *args: str, timeout_s: float = 120) -> str:
        result = subprocess.run(
            [str(VENV_BIN / "airflow"), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            cwd=self.home,
        )
        if result.returncode != 0:
            raise RuntimeError(f"airflow {' '.join(args)} failed: {result.stderr[-2000:]}")
        return result.stdout

    # -- the metadata database (SQLite), read directly: cheap to poll, no Airflow import here

    def _query(self, sql: str, params: tuple[str, ...]) -> list[tuple[object, ...]]:
        url = f"file:{self.home / 'airflow.db'}?mode=ro"
        with contextlib.closing(sqlite3.connect(url, uri=True, timeout=30)) as db:
            return list(db.execute(sql, params).fetchall())

    def dag_ready(self, dag_id: str) -> bool:
        try:
            rows = self._query("SELECT is_paused FROM dag WHERE dag_id = ?", (dag_id,))
            serialized = self._query("SELECT 1 FROM serialized_dag WHERE dag_id = ?", (dag_id,))
        except sqlite3.Error:
            return False
        return bool(rows) and not rows[0][0] and bool(serialized)

    def run_state(self, dag_id: str, run_id: str) -> str | None:
        rows = self._query("SELECT state FROM dag_run WHERE dag_id = ? AND run_id = ?", (dag_id, run_id))
        return str(rows[0][0]) if rows and rows[0][0] is not None else None

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
