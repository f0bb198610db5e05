"""The provider as the experiments drive it: its command line (``python -m airflow_provider_finegrained``: warm
pools, loopback clusters, reports of a run) and its public warm-pool API, never its internals."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class CommandFailed(RuntimeError):
    """A command of the provider (or Airflow) exited with an error; the message holds its stderr's tail."""


def provider_command(*args: str) -> list[str]:
    """``python -m airflow_provider_finegrained ARGS`` with this interpreter."""
    return [sys.executable, "-m", "airflow_provider_finegrained", *args]


def run_command(command: list[str], env: Mapping[str, str] | None = None, timeout_s: float = 600) -> str:
    """``command``'s standard output; :class:`CommandFailed` when it fails."""
    done = subprocess.run(
        command, capture_output=True, text=True, env=None if env is None else dict(env), timeout=timeout_s, check=False
    )
    if done.returncode != 0:
        raise CommandFailed(f"{' '.join(command[:5])} failed: {done.stderr.strip()[-2000:]}")
    return done.stdout


def first_json(text: str) -> Any:
    """The JSON document that fills the output from some line on (CLI log lines may precede it)."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.startswith(("{", "[")):
            try:
                return json.loads("".join(lines[i:]))
            except ValueError:
                continue  # a log line such as "[2026-...] INFO ..."
    raise ValueError(f"no JSON in the output: {text[-500:]!r}")


def json_command(command: list[str], env: Mapping[str, str] | None = None, timeout_s: float = 600) -> Any:
    """The JSON ``command`` prints (after any log lines)."""
    return first_json(run_command(command, env, timeout_s))


def stage_report(dag_id: str, env: Mapping[str, str], run_id: str | None = None) -> dict[str, Any]:
    """``finegrained report DAG_ID --json``: the run's id and each stage's trace, output and plan from XCom
    (``{"run_id": ..., "stages": {stage: {"trace": ..., "output": ..., "plan": ...}}}``), latest run by default."""
    run = ["--run-id", run_id] if run_id else []
    report: dict[str, Any] = json_command(provider_command("report", dag_id, "--json", *run), env)
    return report


# ---------------------------------------------------------------- warm pools


def start_warm_pool(env: Mapping[str, str], idle_timeout_s: float = 86400) -> float:
    """``finegrained warm start`` in ``env`` (its Airflow home, connection and ``[finegrained]`` options); the
    seconds until the pool was healthy. Its idle timeout outlasts a benchmark, which stops it at the end."""
    started = time.perf_counter()
    run_command(provider_command("warm", "start", "--idle-timeout", str(idle_timeout_s)), env, timeout_s=900)
    return time.perf_counter() - started


def warm_folders(airflow_home: Path | None) -> list[Path]:
    """The folders the warm pools of this Airflow home's (local) storage root may live in."""
    from airflow_provider_finegrained.warm import pool_folders

    root = (airflow_home or Path("/nonexistent")) / "finegrained" / "storage" / "_warm"
    return [Path(folder) for folder in pool_folders(root)]


def warm_pool_processes(airflow_home: Path | None) -> list[Any]:
    """The live processes of the warm pools under this Airflow home's storage (outside a run's process tree)."""
    import psutil

    from airflow_provider_finegrained.warm import status

    pids = [pid for folder in warm_folders(airflow_home) for pid in (status(str(folder)) or {}).get("pids", [])]
    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.Error:
            continue  # ended since
    return procs


def stop_warm_pools(airflow_home: Path | None) -> None:
    """Stop every warm pool the benchmark's Airflow started (they outlive runs by design)."""
    from airflow_provider_finegrained.warm import stop

    for folder in warm_folders(airflow_home):
        stop(str(folder))


# ---------------------------------------------------------------- a loopback standalone cluster


@dataclass(frozen=True)
class LocalCluster:
    """A Spark standalone cluster on 127.0.0.1 started by ``finegrained cluster start --dir folder``."""

    folder: Path
    master_url: str
    webui_url: str

    def stop(self) -> None:
        run_command(provider_command("cluster", "stop", "--dir", str(self.folder)), timeout_s=300)


def start_cluster(folder: Path, workers: int, cores: int, memory: str, timeout_s: float = 300) -> LocalCluster:
    """``finegrained cluster start``: a master and ``workers`` workers of ``cores`` and ``memory`` each."""
    sizes = ["--workers", str(workers), "--cores", str(cores), "--memory", memory, "--timeout", str(timeout_s)]
    out = run_command(provider_command("cluster", "start", "--dir", str(folder), *sizes), timeout_s=timeout_s + 60)
    return started_cluster(folder, out)


def started_cluster(folder: Path, out: str) -> LocalCluster:
    """The cluster ``cluster start`` printed (its ``master:`` and ``web UI:`` lines)."""
    urls = dict(re.findall(r"^(master|web UI):\s+(\S+)", out, flags=re.M))
    if set(urls) != {"master", "web UI"}:
        raise CommandFailed(f"cluster start printed no master and web UI URL: {out[-1000:]}")
    return LocalCluster(folder, urls["master"], urls["web UI"])
