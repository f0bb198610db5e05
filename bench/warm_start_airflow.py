"""Warm stage start in a fresh Airflow task process, under ``airflow standalone`` (LocalExecutor, SQLite).

One DAG with one warm stage. The task logs a timestamped line when its ``execute()`` starts (the
operator's ``pre_execute`` hook, called just before it, with the task process's start time) and the stage
function logs one first thing, i.e. once its Spark Connect session holds the stage's settings (it also
prints the setting it sees). Both lines are parsed from Airflow's task log. Two modes, alternating run by
run in one ``airflow standalone``, against one warm pool:

- ``in-process`` (before): the pool's ready driver is hidden (its socket renamed), so the task runs the
  region itself and imports pyspark's Connect client (pandas, pyarrow, gRPC), as before the ready driver;
- ``ready-driver`` (after): the region runs in a child forked from the pool's ready driver.

    python -m bench warm-start-airflow --repeats 5

Writes bench/results/warm-start-airflow.json and .md. The first run of each mode is a warm-up, reported
apart and left out of the medians.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.kill_trials.runner import snapshot_source
from bench.kill_trials.standalone import VENV_BIN, Standalone, airflow_env, free_port

REPO = Path(__file__).resolve().parent.parent

RESULTS = REPO / "bench" / "results"
DAG_ID = "warm_start_bench"
MODES = ("in-process", "ready-driver")
GOAL_S = 1.0

DAG = '''
"""One warm stage whose start is timed: see bench/warm_start_airflow.py (python -m bench warm-start-airflow)."""
import time

import pendulum
import psutil
from airflow.sdk import DAG

from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator


def mark_execute_start(context):
    print(f"BENCH execute_start {time.time():.6f} process_start {psutil.Process().create_time():.6f}", flush=True)


def numbers(spark):
    # The first thing the stage does: its session holds the stage's settings by now.
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    print(f"BENCH stage_ready {time.time():.6f} partitions {partitions}", flush=True)
    return spark.range(1000).withColumnRenamed("id", "n")


with DAG(DAG_ID, schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), catchup=False, max_active_runs=1):
    SparkStageOperator(task_id="numbers", python_callable=numbers, pre_execute=mark_execute_start)
'''.replace("DAG_ID", repr(DAG_ID))

_EXECUTE = re.compile(r"BENCH execute_start (\d+\.\d+) process_start (\d+\.\d+)")
_READY = re.compile(r"BENCH stage_ready (\d+\.\d+) partitions (\S+?)[\"\\\s]")
_DRIVER = "runs in the warm pool's ready region driver"
_IN_PROCESS = "runs in this task process"


def log(message: str) -> None:
    print(f"[{datetime.now(UTC).strftime('%H:%M:%S')}] {message}", flush=True)


def launched_at(text: str) -> float | None:
    """When the launcher took the region (the task log's timestamp of its line saying where the region runs)."""
    for line in text.splitlines():
        if _DRIVER in line or _IN_PROCESS in line:
            with contextlib.suppress(ValueError, KeyError, TypeError):
                return datetime.fromisoformat(json.loads(line)["timestamp"].replace("Z", "+00:00")).timestamp()
    return None


def parse_task_log(text: str) -> dict[str, Any]:
    """The run's marks from its task log: seconds from execute() start (and process start) to the ready stage,
    split at the launch (before it: the region's planning in the task, the same in both modes)."""
    execute, ready = _EXECUTE.search(text), _READY.search(text)
    if execute is None or ready is None:
        raise ValueError("the task log lacks a BENCH line")
    execute_at, process_at, ready_at = float(execute[1]), float(execute[2]), float(ready[1])
    launch = launched_at(text)
    return {
        "execute_to_ready_s": round(ready_at - execute_at, 3),
        "execute_to_launch_s": None if launch is None else round(launch - execute_at, 3),
        "launch_to_ready_s": None if launch is None else round(ready_at - launch, 3),
        "process_to_ready_s": round(ready_at - process_at, 3),
        "process_to_execute_s": round(execute_at - process_at, 3),
        "partitions_seen": ready[2],
        "path": "ready-driver" if _DRIVER in text else ("in-process" if _IN_PROCESS in text else "unknown"),
    }


def task_log(home: Path, run_id: str) -> str:
    folder = home / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}" / "task_id=numbers"
    return "\n".join(path.read_text(errors="replace") for path in sorted(folder.glob("attempt=*.log")))


def set_mode(socket: Path, mode: str) -> None:
    """``in-process``: the ready driver's socket renamed out of the tasks' sight; ``ready-driver``: back."""
    hidden = socket.with_name(socket.name + ".hidden")
    if mode == "in-process" and socket.exists():
        os.rename(socket, hidden)
    elif mode == "ready-driver" and hidden.exists():
        os.rename(hidden, socket)


def run_once(standalone: Standalone, home: Path, socket: Path, mode: str, number: int) -> dict[str, Any]:
    set_mode(socket, mode)
    run_id = f"{mode}-{number:02d}-{int(time.time())}"
    load = round(os.getloadavg()[0], 1)  # other work on the machine stretches every figure
    standalone.cli("dags", "trigger", DAG_ID, "--run-id", run_id)
    deadline = time.monotonic() + 300
    while standalone.run_state(DAG_ID, run_id) not in ("success", "failed"):
        if time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} did not finish in 300 s")
        time.sleep(1)
    state = standalone.run_state(DAG_ID, run_id)
    record: dict[str, Any] = {"mode": mode, "run_id": run_id, "state": state, "load_1m": load}
    try:
        record.update(parse_task_log(task_log(home, run_id)))
    except ValueError as exc:
        log(f"{run_id}: {state}, {exc} (see {home / 'standalone.log'})")
        return record
    log(
        f"{run_id}: {state}, execute -> ready {record['execute_to_ready_s']} s (launch -> ready "
        f"{record['launch_to_ready_s']} s, {record['path']}, load {load})"
    )
    return record


def measured(standalone: Standalone, home: Path, socket: Path, mode: str, number: int, failed: list[Any]) -> Any:
    """A run of ``mode`` with both marks; a run that lacks them (Airflow failed the task before execute(),
    e.g. its API server timed out on a loaded machine) is kept in ``failed`` and run again, up to 3 times."""
    for _ in range(3):
        record = run_once(standalone, home, socket, mode, number)
        if "execute_to_ready_s" in record:
            return record
        failed.append(record)
    raise RuntimeError(f"three runs of {mode} without a measurement; see {home / 'standalone.log'}")


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    def median(key: str) -> float | None:
        values = [r[key] for r in records if r.get(key) is not None]
        return round(statistics.median(values), 3) if values else None

    return {
        "runs": len(records),
        "execute_to_ready_s": [r["execute_to_ready_s"] for r in records],
        "launch_to_ready_s": [r["launch_to_ready_s"] for r in records],
        "load_1m": [r["load_1m"] for r in records],
        "median_execute_to_ready_s": median("execute_to_ready_s"),
        "median_execute_to_launch_s": median("execute_to_launch_s"),
        "median_launch_to_ready_s": median("launch_to_ready_s"),
        "median_process_to_ready_s": median("process_to_ready_s"),
        "median_process_to_execute_s": median("process_to_execute_s"),
        "paths": sorted({r["path"] for r in records}),
    }


def render(result: dict[str, Any]) -> str:
    lines = [
        "# Warm stage start in a fresh Airflow task process (airflow standalone, LocalExecutor)",
        "",
        f"Command: `{result['command']}` (provider code {result['provider_code']}); {result['repeats']} runs per "
        "mode after one warm-up each, alternating; "
        f"load average (1 min) {result['machine']['load_average_1m']}.",
        "",
        "| mode | execute() start to session ready | of which: execute() to launch | launch to ready | "
        "task process start to ready | runs: execute() to ready | load (1 min) at each run |",
        "|---|---|---|---|---|---|---|",
    ]
    for mode in MODES:
        data = result["modes"][mode]
        runs = ", ".join(f"{value:.2f}" for value in data["execute_to_ready_s"])
        loads = ", ".join(f"{value:g}" for value in data["load_1m"])
        lines.append(
            f"| {mode} | {data['median_execute_to_ready_s']} s | {data['median_execute_to_launch_s']} s | "
            f"{data['median_launch_to_ready_s']} s | {data['median_process_to_ready_s']} s | {runs} | {loads} |"
        )
    lines += ["", "Medians in seconds; launch = the task log's line saying where the region runs."]
    lines += [
        "",
        f"Goal: under {GOAL_S:g} s from execute() start: {'met' if result['goal_met'] else 'NOT met'}. "
        f"Runs without a measurement (Airflow failed the task before execute()): {len(result['unmeasured_runs'])}.",
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench warm-start-airflow", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS / "warm-start-airflow.json")
    parser.add_argument(
        "--source",
        default="HEAD",
        help="the provider code to run: a git revision (exported, so edits landing meanwhile do not count) "
        "or 'worktree' (the checkout as it is)",
    )
    args = parser.parse_args(argv)

    home = Path(tempfile.mkdtemp(prefix="warm-start-airflow-"))
    (home / "dags").mkdir()
    (home / "dags" / "warm_start_bench.py").write_text(DAG)
    commit, source_dir = snapshot_source(args.source, home / "src")
    extra = {"AIRFLOW__FINEGRAINED__WARM_POOL": "auto", "AIRFLOW__FINEGRAINED__WARM_IDLE_TIMEOUT": "3600"}
    if source_dir is not None:
        extra["PYTHONPATH"] = str(source_dir)  # ahead of the editable install's finder
    port = free_port()
    env = airflow_env(home, port, extra)
    load_at_start = os.getloadavg()[0]
    log(f"home {home}, provider code {commit}")
    subprocess.run([str(VENV_BIN / "airflow"), "db", "migrate"], env=env, check=True, capture_output=True, timeout=600)
    standalone = Standalone(home, env)
    records: list[dict[str, Any]] = []
    warmups: list[dict[str, Any]] = []
    failed: list[dict[str, Any]] = []
    warm = [str(VENV_BIN / "python"), "-m", "airflow_provider_finegrained", "warm"]
    standalone_s = 0.0
    try:
        standalone_s = standalone.start(timeout_s=900)  # minutes on a loaded 2-core machine
        log(f"airflow standalone ready in {standalone_s:.0f} s")
        began = time.monotonic()
        subprocess.run([*warm, "start"], env=env, check=True, capture_output=True, timeout=300)
        sockets: list[Path] = []
        deadline = time.monotonic() + 120
        while not sockets and time.monotonic() < deadline:
            sockets = list(home.rglob("driver.sock"))
            time.sleep(0.5)
        if not sockets:
            raise RuntimeError(f"no ready driver socket under {home} after the pool started")
        socket = sockets[0]
        log(f"warm pool and its ready driver up in {time.monotonic() - began:.0f} s ({socket.parent})")
        deadline = time.monotonic() + 180
        while not standalone.dag_ready(DAG_ID):
            if time.monotonic() > deadline:
                raise RuntimeError(f"DAG {DAG_ID} not parsed after 180 s; see {standalone.log}")
            time.sleep(2)
        for mode in MODES:
            warmups.append(measured(standalone, home, socket, mode, 0, failed))
        for number in range(1, args.repeats + 1):
            # Alternating, and the order flipped every other pair, so neither mode always runs second.
            order = MODES if number % 2 else MODES[::-1]
            for mode in order:
                records.append(measured(standalone, home, socket, mode, number, failed))
        set_mode(socket, "ready-driver")
    finally:
        standalone.stop()
        subprocess.run([*warm, "stop"], env=env, capture_output=True, timeout=180, check=False)
    modes = {mode: summary([r for r in records if r["mode"] == mode]) for mode in MODES}
    after = modes["ready-driver"]
    result = {
        "command": f"python -m bench warm-start-airflow --repeats {args.repeats}",
        "provider_code": commit,
        "repeats": args.repeats,
        "machine": {
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_average_1m": [round(load_at_start, 2), round(os.getloadavg()[0], 2)],
        },
        "standalone_start_s": round(standalone_s, 1),
        "goal_s": GOAL_S,
        "goal_met": (after["median_execute_to_ready_s"] or GOAL_S) < GOAL_S and after["paths"] == ["ready-driver"],
        "modes": modes,
        "warmups": warmups,
        "unmeasured_runs": failed,
        "runs": records,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(render(result))
    print(render(result))
    return 0 if all(r["state"] == "success" for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
