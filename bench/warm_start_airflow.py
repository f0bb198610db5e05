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
import re
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.lib.airflow import REPO, Standalone, free_port, migrate, snapshot_source, standalone_env
from bench.lib.provider import provider_command, run_command
from bench.lib.report import load_1m, machine_brief, write_results
from bench.lib.stats import median_of
from bench.lib.sweep import alternating

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
    standalone.trigger(DAG_ID, run_id)
    state = standalone.wait_ended(DAG_ID, [run_id], timeout_s=300)[run_id]
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


MEDIANS = (
    "execute_to_ready_s",
    "execute_to_launch_s",
    "launch_to_ready_s",
    "process_to_ready_s",
    "process_to_execute_s",
)
"""The marks whose medians a mode's summary gives (``median_<mark>``)."""


def summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "runs": len(records),
        "execute_to_ready_s": [r["execute_to_ready_s"] for r in records],
        "launch_to_ready_s": [r["launch_to_ready_s"] for r in records],
        "load_1m": [r["load_1m"] for r in records],
        **{f"median_{key}": median_of(records, key, 3) for key in MEDIANS},
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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench warm-start-airflow", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS / "warm-start-airflow.json")
    parser.add_argument(
        "--source",
        default="HEAD",
        help="the provider code to run: a git revision (exported, so edits landing meanwhile do not count) "
        "or 'worktree' (the checkout as it is)",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="warm-start-airflow-"))
    (home / "dags").mkdir()
    (home / "dags" / "warm_start_bench.py").write_text(DAG)
    commit, source_dir = snapshot_source(args.source, home / "src")
    extra = {"AIRFLOW__FINEGRAINED__WARM_POOL": "auto", "AIRFLOW__FINEGRAINED__WARM_IDLE_TIMEOUT": "3600"}
    # The snapshot ahead of the editable install's finder.
    env = standalone_env(home, free_port(), extra, pythonpath=[str(source_dir)] if source_dir else [])
    load_at_start = load_1m()
    log(f"home {home}, provider code {commit}")
    migrate(env, timeout_s=600)
    standalone = Standalone(home, env)
    runs = Runs()
    try:
        runs.standalone_s = standalone.start(timeout_s=900)  # minutes on a loaded 2-core machine
        log(f"airflow standalone ready in {runs.standalone_s:.0f} s")
        socket = start_pool(standalone, home, env)
        standalone.wait_parsed(DAG_ID, timeout_s=180)
        run_modes(standalone, home, socket, args.repeats, runs)
    finally:
        standalone.stop()
        subprocess_quiet(provider_command("warm", "stop"), env)
    result = results(args, commit, runs, [load_at_start, load_1m()])
    write_results(args.out, result, render(result), indent=1)
    print(render(result))
    return 0 if all(r["state"] == "success" for r in runs.records) else 1


@dataclass
class Runs:
    """What the runs measured: each mode's runs, the warm-ups, the runs without a measurement."""

    records: list[dict[str, Any]] = field(default_factory=list)
    warmups: list[dict[str, Any]] = field(default_factory=list)
    failed: list[dict[str, Any]] = field(default_factory=list)
    standalone_s: float = 0.0


def start_pool(standalone: Standalone, home: Path, env: dict[str, str]) -> Path:
    """``finegrained warm start`` in the standalone's environment; the pool's ready driver's socket."""
    began = time.monotonic()
    run_command(provider_command("warm", "start"), env, timeout_s=300)
    sockets: list[Path] = []
    deadline = time.monotonic() + 120
    while not sockets and time.monotonic() < deadline:
        sockets = list(home.rglob("driver.sock"))
        time.sleep(0.5)
    if not sockets:
        raise RuntimeError(f"no ready driver socket under {home} after the pool started")
    log(f"warm pool and its ready driver up in {time.monotonic() - began:.0f} s ({sockets[0].parent})")
    return sockets[0]


def run_modes(standalone: Standalone, home: Path, socket: Path, repeats: int, runs: Runs) -> None:
    """A warm-up run of each mode, then ``repeats`` of each, alternating, the order flipped every other pair (so
    neither mode always runs second); the ready driver's socket back in place at the end."""
    for mode in MODES:
        runs.warmups.append(measured(standalone, home, socket, mode, 0, runs.failed))
    for number in range(1, repeats + 1):
        for mode in alternating(MODES, number + 1):
            runs.records.append(measured(standalone, home, socket, mode, number, runs.failed))
    set_mode(socket, "ready-driver")


def results(args: argparse.Namespace, commit: str, runs: Runs, load: list[float]) -> dict[str, Any]:
    modes = {mode: summary([r for r in runs.records if r["mode"] == mode]) for mode in MODES}
    after = modes["ready-driver"]
    return {
        "command": f"python -m bench warm-start-airflow --repeats {args.repeats}",
        "provider_code": commit,
        "repeats": args.repeats,
        "machine": machine_brief(load),
        "standalone_start_s": round(runs.standalone_s, 1),
        "goal_s": GOAL_S,
        "goal_met": (after["median_execute_to_ready_s"] or GOAL_S) < GOAL_S and after["paths"] == ["ready-driver"],
        "modes": modes,
        "warmups": runs.warmups,
        "unmeasured_runs": runs.failed,
        "runs": runs.records,
    }


def subprocess_quiet(command: list[str], env: dict[str, str]) -> None:
    """Run ``command``; its failure (the pool already gone) is only printed."""
    with contextlib.suppress(RuntimeError):
        run_command(command, env, timeout_s=180)


if __name__ == "__main__":
    raise SystemExit(main())
