"""What Spark says an application did: its event logs, and its status REST API.

Event logs are the one source of task counts and task CPU for every variant (spark-submit runs and the
provider's regions alike): each ``SparkListenerTaskEnd`` is one task attempt, with its executor CPU time
in nanoseconds; ``SparkListenerJobStart`` carries the job group (the stage name) of its Spark stages.
The REST API (``/api/v1/applications/<app>/...``) gives a running application's stages by job tag or group.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# ---------------------------------------------------------------- event logs


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

    def count_task(self, group: str, cpu_s: float, run_s: float) -> None:
        self.tasks += 1
        self.task_cpu_s += cpu_s
        self.task_run_s += run_s
        slot = self.per_group.setdefault(group, {"tasks": 0, "task_cpu_s": 0.0, "task_run_s": 0.0})
        slot["tasks"] += 1
        slot["task_cpu_s"] += cpu_s
        slot["task_run_s"] += run_s


def events(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The events of an event log's JSON lines (a partial last line of a log still being written is skipped)."""
    for line in lines:
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except ValueError:
            continue


def parse_event_log(lines: Iterable[str]) -> SparkWork:
    """Tasks and task CPU of one application's event log (JSON lines), per job group too."""
    work = SparkWork()
    group_of_stage: dict[int, str] = {}
    pending: list[dict[str, Any]] = []
    for event in events(lines):
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
        group = group_of_stage.get(int(event.get("Stage ID", -1)), "(no group)")
        cpu_s = int(metrics.get("Executor CPU Time", 0)) / 1e9
        work.count_task(group, cpu_s, int(metrics.get("Executor Run Time", 0)) / 1000)
    return work


def event_files(entry: Path) -> list[Path]:
    """One application's log files in order: a plain file, or a rolling log folder's ``events_<n>_*`` parts."""
    if entry.is_file():
        return [entry]
    parts = [p for p in entry.iterdir() if p.is_file() and p.name.startswith("events_")]
    return sorted(parts, key=lambda p: int(p.name.split("_")[1]) if p.name.split("_")[1].isdigit() else 0)


def event_lines(entry: Path) -> Iterator[str]:
    """The lines of one application's event log (``entry``: a file or a rolling log's folder)."""
    for path in event_files(entry):
        with path.open(errors="replace") as f:
            yield from f


def read_event_logs(folder: Path) -> SparkWork:
    """The sum over every application's event log in ``folder`` (uncompressed; single-file or rolling)."""
    total = SparkWork()
    for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
        total.add(parse_event_log(event_lines(entry)))
    return total


def event_log_conf(folder: Path) -> dict[str, str]:
    """Spark properties that write plain JSON event logs into ``folder`` (created here; Spark 4 compresses and
    rolls them by default)."""
    folder.mkdir(parents=True, exist_ok=True)
    return {
        "spark.eventLog.enabled": "true",
        "spark.eventLog.dir": folder.resolve().as_uri(),
        "spark.eventLog.compress": "false",
        "spark.eventLog.rolling.enabled": "false",
    }


# ---------------------------------------------------------------- the status REST API

METRICS = (
    "tasks",
    "run_time_s",
    "cpu_time_s",
    "input_bytes",
    "shuffle_read_bytes",
    "shuffle_write_bytes",
    "memory_spilled_bytes",
    "disk_spilled_bytes",
)
"""What :func:`stage_metrics` sums per tag."""


def get_json(url: str, timeout_s: float = 60.0) -> Any:
    """The JSON a GET of ``url`` answers (Spark's status API on loopback)."""
    with urllib.request.urlopen(url, timeout=timeout_s) as response:
        return json.loads(response.read())


def application_api(ui_url: str, application_id: str) -> str:
    """The status API's base URL of one application."""
    return f"{ui_url.rstrip('/')}/api/v1/applications/{application_id}"


def tagged_stage_ids(jobs: Iterable[dict[str, Any]], tag: str, *, job_group: bool = False) -> list[int]:
    """The Spark stages of the jobs tagged ``tag`` (or, with ``job_group``, of the jobs in the job group ``tag``)."""
    return sorted({s for job in jobs if _is_tagged(job, tag, job_group) for s in job["stageIds"]})


def stage_metrics(
    ui_url: str, application_id: str, tags: Iterable[str], *, job_group: bool = False
) -> dict[str, dict[str, float]]:
    """``{tag: {metric: value}}`` summed over the completed Spark stages of the jobs tagged ``tag`` (or, with
    ``job_group``, of the jobs in the job group ``tag``: a classic session's tags carry its thread's id).

    A Spark Connect server tags every job with the client's tags (``..._Tag_<tag>``)."""
    base = application_api(ui_url, application_id)
    jobs = get_json(f"{base}/jobs")
    out: dict[str, dict[str, float]] = {}
    for tag in tags:
        totals = dict.fromkeys(METRICS, 0.0)
        for sid in tagged_stage_ids(jobs, tag, job_group=job_group):
            for attempt in get_json(f"{base}/stages/{sid}"):
                if attempt.get("status") != "COMPLETE":
                    continue  # skipped stages reused an earlier shuffle: no work
                _add(totals, attempt)
        out[tag] = totals
    return out


def _is_tagged(job: dict[str, Any], tag: str, job_group: bool) -> bool:
    if job_group:
        return bool(job.get("jobGroup") == tag)
    return any(t == tag or t.endswith(f"_Tag_{tag}") for t in job.get("jobTags") or [])


def _add(totals: dict[str, float], a: dict[str, Any]) -> None:
    totals["tasks"] += int(a.get("numTasks", 0))
    totals["run_time_s"] += int(a.get("executorRunTime", 0)) / 1000
    totals["cpu_time_s"] += int(a.get("executorCpuTime", 0)) / 1e9
    totals["input_bytes"] += int(a.get("inputBytes", 0))
    totals["shuffle_read_bytes"] += int(a.get("shuffleReadBytes", 0))
    totals["shuffle_write_bytes"] += int(a.get("shuffleWriteBytes", 0))
    totals["memory_spilled_bytes"] += int(a.get("memoryBytesSpilled", 0))
    totals["disk_spilled_bytes"] += int(a.get("diskBytesSpilled", 0))
