"""Running Airflow for the experiments: a home for ``airflow dags test``, and ``airflow standalone`` in its own.

Imports nothing but the standard library: every Airflow process of :class:`Standalone` imports
:data:`CONNECT_ARGS` from here (``[database] sql_alchemy_connect_args``).
"""

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
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

VENV_BIN: Final = Path(sys.executable).parent
REPO: Final = Path(__file__).resolve().parents[2]
READY_LINE: Final = "Airflow is ready"

CONNECT_ARGS: Final = {"timeout": 120}
"""SQLite connect arguments of the standalone Airflow. sqlite3 gives up on a locked database after 5 s; under the
shared-cluster benchmark's load (1-minute load average 30 to 50 on 2 cores) a writer held the lock longer and
Airflow's scheduler died on "database is locked", leaving every DAG run stuck. Waiting up to 120 s keeps it."""


def airflow() -> str:
    """This environment's ``airflow`` command."""
    return str(VENV_BIN / "airflow")


def airflow_env(home: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of an Airflow whose home is ``home`` (none of this process's ``AIRFLOW*`` variables)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW")}
    env.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
    )
    env.update(extra or {})
    return env


def migrate(env: Mapping[str, str], timeout_s: float = 900) -> None:
    """``airflow db migrate`` in ``env``'s home."""
    subprocess.run([airflow(), "db", "migrate"], check=True, capture_output=True, env=dict(env), timeout=timeout_s)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def standalone_env(
    home: Path, port: int, extra: Mapping[str, str] | None = None, pythonpath: Sequence[str] = ()
) -> dict[str, str]:
    """The environment of every process of an ``airflow standalone``: its home, a free API port, low parallelism.

    ``pythonpath``: folders ahead of this checkout on every process's path (a snapshot of the provider's code)."""
    env = airflow_env(home)
    env.update(
        {
            "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",
            "AIRFLOW__CORE__PARALLELISM": "4",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "True",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(port),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://127.0.0.1:{port}/execution/",
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": "5",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "1",
            # A task resumed from deferral parses its DAG file again; at a load of 30 on 2 cores that took over
            # Airflow's 30 s and the task failed with "Dag not found during start up".
            "AIRFLOW__CORE__DAGBAG_IMPORT_TIMEOUT": "300",
            # At that load the API server answered a task's start request after 7 to 25 s; Airflow's 5 s
            # client timeout retried it until the task failed ("Duplicate start request received").
            "AIRFLOW__WORKERS__EXECUTION_API_TIMEOUT": "120",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS": f"{__name__}.CONNECT_ARGS",
            # Every Airflow process imports the line above from this checkout.
            "PYTHONPATH": os.pathsep.join(p for p in (*pythonpath, str(REPO), os.environ.get("PYTHONPATH", "")) if p),
            "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }
    )
    env.update(extra or {})
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
                [airflow(), "standalone"],
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
            [airflow(), *args], env=self.env, capture_output=True, text=True, timeout=timeout_s, cwd=self.home
        )
        if result.returncode != 0:
            raise RuntimeError(f"airflow {' '.join(args)} failed: {result.stderr[-2000:]}")
        return result.stdout

    def trigger(self, dag_id: str, run_id: str, conf: str | None = None) -> None:
        """Trigger a run of ``dag_id`` named ``run_id`` (``conf``: its JSON)."""
        self.cli("dags", "trigger", dag_id, "--run-id", run_id, *(["--conf", conf] if conf else []))

    def wait_parsed(self, dag_id: str, timeout_s: float = 300) -> None:
        """Wait until the DAG processor has parsed ``dag_id`` and it is unpaused."""
        deadline = time.monotonic() + timeout_s
        while not self.dag_ready(dag_id):
            if time.monotonic() > deadline:
                raise TimeoutError(f"{dag_id} not parsed after {timeout_s:.0f} s; see {self.log}")
            time.sleep(1)

    def wait_ended(self, dag_id: str, run_ids: Sequence[str], timeout_s: float) -> dict[str, str | None]:
        """Wait until every run of ``run_ids`` succeeded or failed; their states."""
        deadline = time.monotonic() + timeout_s
        while True:
            states = {rid: self.run_state(dag_id, rid) for rid in run_ids}
            if all(s in ("success", "failed") for s in states.values()):
                return states
            if time.monotonic() > deadline:
                raise TimeoutError(f"runs not finished after {timeout_s:.0f} s ({states}); see {self.log}")
            time.sleep(1)

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


def snapshot_source(source: str, target: Path) -> tuple[str, Path | None]:
    """The provider's code a run uses: ``worktree`` (the checkout as it is) or a git revision exported to
    ``target`` (put first on PYTHONPATH, so commits landing meanwhile do not change a running harness)."""
    if source == "worktree":
        return "worktree of " + _git("rev-parse", "--short", "HEAD") + " (uncommitted changes included)", None
    commit = _git("rev-parse", source)
    target.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "archive", commit, "airflow_provider_finegrained"], cwd=REPO, check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return commit, target


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=REPO, check=True, capture_output=True, text=True).stdout.strip()
