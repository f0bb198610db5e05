"""Measuring a variant's run: wall time, peak memory of its process tree, CPU, and Spark's event logs.

Event logs are the one source of task counts and task CPU for every variant (spark-submit runs and the
provider's regions alike): each ``SparkListenerTaskEnd`` is one task attempt, with its executor CPU time
in nanoseconds; ``SparkListenerJobStart`` carries the job group (the stage name) of its Spark stages.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil


@dataclass
class ProcessRun:
    """One subprocess run to its end: exit code, wall seconds, peak RSS of its tree, CPU of its waited tree."""

    returncode: int
    wall_s: float
    peak_rss_bytes: int
    cpu_s: float
    output_tail: list[str] = field(default_factory=list)


def tree_rss(root: psutil.Process) -> int:
    """Resident bytes of ``root`` and all its descendants now (processes that vanish meanwhile count 0)."""
    total = 0
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_measured(
    command: Sequence[str],
    env: Mapping[str, str],
    *,
    cwd: str | None = None,
    log: Path | None = None,
    interval_s: float = 0.2,
    timeout_s: float = 3600.0,
    extra: Callable[[], list[psutil.Process]] | None = None,
) -> ProcessRun:
    """Run ``command`` to its end, sampling its process tree's RSS every ``interval_s``.

    CPU is the change of this process's waited-children usage, so it counts every descendant that its
    parent waited for (spark-submit's JVM and Python workers, Airflow's task processes); run one measured
    command at a time for it to mean one command. ``extra`` lists processes outside the tree that work for
    it (a warm pool the run uses): their RSS joins each sample and their CPU over the run is added.
    """
    peak = 0
    cpu_before = _children_cpu_s()
    extra_before = _cpu_of(extra() if extra else [])
    start = time.perf_counter()
    with open(log or os.devnull, "ab") as sink:
        proc = subprocess.Popen(list(command), env=dict(env), cwd=cwd, stdout=sink, stderr=subprocess.STDOUT)
        root = psutil.Process(proc.pid)
        done = threading.Event()

        def sample() -> None:
            nonlocal peak
            while not done.is_set():
                outside = _rss_of(extra()) if extra else 0  # the list holds the descendants already
                peak = max(peak, tree_rss(root) + outside)
                done.wait(interval_s)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            returncode = proc.wait(timeout=timeout_s)
        except BaseException as exc:
            # A timeout, or the harness being stopped: nothing of the run may outlive it (an orphaned
            # `airflow dags test` would start the warm pool again after the harness stopped it).
            for child in root.children(recursive=True):
                child.kill()
            proc.kill()
            returncode = proc.wait()
            if not isinstance(exc, subprocess.TimeoutExpired):
                raise
        finally:
            done.set()
            sampler.join()
    wall = time.perf_counter() - start
    tail = log.read_text(errors="replace").splitlines()[-30:] if log and log.exists() else []
    extra_cpu = sum(_cpu_of(extra()).values()) - sum(extra_before.values()) if extra else 0.0
    return ProcessRun(returncode, wall, peak, _children_cpu_s() - cpu_before + extra_cpu, tail)


def _rss_of(procs: list[psutil.Process]) -> int:
    total = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total


def _cpu_of(procs: list[psutil.Process]) -> dict[int, float]:
    out: dict[int, float] = {}
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            t = proc.cpu_times()
            out[proc.pid] = t.user + t.system
    return out


@dataclass
class SparkWork:
    """What Spark's event logs say one or more applications did, in total and per job group (stage)."""

    applications: int = 0
    tasks: int = 0
    task_cpu_s: float = 0.0
    task_run_s: float = 0.0
    per_group: dict[str, dict[str, float]] = field(default_factory=dict)
    """Job group -> {"tasks": n, "task_cpu_s": s, "task_run_s": s}."""

    def minus(self, before: SparkWork) -> SparkWork:
        """What happened since ``before`` was read from the same (still growing) logs."""
        out = SparkWork(
            self.applications - before.applications,
            self.tasks - before.tasks,
            self.task_cpu_s - before.task_cpu_s,
            self.task_run_s - before.task_run_s,
        )
        for group, values in self.per_group.items():
            old = before.per_group.get(group, {})
            diff = {k: v - old.get(k, 0) for k, v in values.items()}
            if diff["tasks"]:
                out.per_group[group] = diff
        return out

    def add(self, other: SparkWork) -> None:
        self.applications += other.applications
        self.tasks += other.tasks
        self.task_cpu_s += other.task_cpu_s
        self.task_run_s += other.task_run_s
        for group, values in other.per_group.items():
            mine = self.per_group.setdefault(group, {"tasks": 0, "task_cpu_s": 0.0, "task_run_s": 0.0})
            for key, value in values.items():
                mine[key] += value


def parse_event_log(lines: Iterable[str]) -> SparkWork:
    """Tasks and task CPU of one application's event log (JSON lines), per job group too."""
    work = SparkWork()
    group_of_stage: dict[int, str] = {}
    pending: list[dict[str, Any]] = []
    for line in lines:
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue  # the last line of a log still being written (a warm pool's) may be partial
        kind = event.get("Event")
        if kind == "SparkListenerApplicationStart":
            work.applications += 1
        elif kind == "SparkListenerJobStart":
            group = (event.get("Properties") or {}).get("spark.jobGroup.id")
            if group:
                for stage_id in event.get("Stage IDs", []):
                    group_of_stage[int(stage_id)] = str(group)
        elif kind == "SparkListenerTaskEnd":
            pending.append(event)
    for event in pending:
        metrics = event.get("Task Metrics") or {}
        cpu = int(metrics.get("Executor CPU Time", 0)) / 1e9
        run = int(metrics.get("Executor Run Time", 0)) / 1000
        work.tasks += 1
        work.task_cpu_s += cpu
        work.task_run_s += run
        group = group_of_stage.get(int(event.get("Stage ID", -1)), "(no group)")
        slot = work.per_group.setdefault(group, {"tasks": 0, "task_cpu_s": 0.0, "task_run_s": 0.0})
        slot["tasks"] += 1
        slot["task_cpu_s"] += cpu
        slot["task_run_s"] += run
    return work


def _event_files(entry: Path) -> list[Path]:
    """One application's log files in order: a plain file, or a rolling log folder's ``events_<n>_*`` parts."""
    if entry.is_file():
        return [entry]
    parts = [p for p in entry.iterdir() if p.is_file() and p.name.startswith("events_")]
    return sorted(parts, key=lambda p: int(p.name.split("_")[1]) if p.name.split("_")[1].isdigit() else 0)


def _lines(files: Iterable[Path]) -> Iterator[str]:
    for path in files:
        with path.open(errors="replace") as f:
            yield from f


def read_event_logs(folder: Path) -> SparkWork:
    """The sum over every application's event log in ``folder`` (uncompressed; single-file or rolling)."""
    total = SparkWork()
    for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
        total.add(parse_event_log(_lines(_event_files(entry))))
    return total


def event_log_conf(folder: Path) -> dict[str, str]:
    """Spark properties that write plain JSON event logs into ``folder`` (created here)."""
    folder.mkdir(parents=True, exist_ok=True)
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": folder.resolve().as_uri(),
        "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false",
    }
