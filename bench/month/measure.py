"""One day's figures for one policy: what the cluster reserved, what Spark used and spilled, and the answers.

Reserved core-seconds come from the cluster manager: YARN's application report (``vcoreSeconds``, the
application master's container included) for the applications that started in the run's window; on
standalone, executors' lifetimes x cores from the event logs (shared-cluster's measure). Used core-seconds
(tasks' run times x cores) and spill (memory and disk bytes spilled) come from Spark's event logs.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.lib.answers import Rows, compare_answers, read_rows
from bench.lib.pipeline import ANSWERS
from bench.lib.spark_metrics import event_lines, events, get_json
from bench.lib.yarn import apps_of
from bench.month.policies import TENANT_NAME
from bench.shared_cluster.events import AppUsage, parse_events


@dataclass(frozen=True)
class AppFigures:
    """One application's event-log figures."""

    usage: AppUsage
    memory_spilled_bytes: int
    disk_spilled_bytes: int
    failed_tasks: int


def spill_and_failures(lines: Iterable[str]) -> tuple[int, int, int]:
    """(memory bytes spilled, disk bytes spilled, failed task attempts) over an event log's tasks."""
    memory = disk = failed = 0
    for event in events(lines):
        if event.get("Event") != "SparkListenerTaskEnd":
            continue
        metrics = event.get("Task Metrics") or {}
        memory += int(metrics.get("Memory Bytes Spilled", 0))
        disk += int(metrics.get("Disk Bytes Spilled", 0))
        failed += bool((event.get("Task Info") or {}).get("Failed"))
    return memory, disk, failed


def read_figures(folder: Path) -> list[AppFigures]:
    """Every finished application's figures in ``folder`` (plain JSON event logs)."""
    out = []
    for entry in sorted(folder.iterdir()) if folder.is_dir() else []:
        if entry.name.endswith(".inprogress"):
            continue
        lines = list(event_lines(entry))
        out.append(AppFigures(parse_events(lines), *spill_and_failures(lines)))
    return out


def spark_figures(apps: Iterable[AppFigures], started: float, ended: float) -> dict[str, Any]:
    """The event-log figures of the applications that started inside [started, ended]."""
    mine = [a for a in apps if a.usage.start is not None and started <= a.usage.start <= ended]
    return {
        "applications": len(mine),
        "executor_core_s": sum(a.usage.reserved_core_s for a in mine),
        "used_core_s": sum(a.usage.used_core_s for a in mine),
        "tasks": sum(a.usage.tasks for a in mine),
        "failed_tasks": sum(a.failed_tasks for a in mine),
        "memory_spilled_bytes": sum(a.memory_spilled_bytes for a in mine),
        "disk_spilled_bytes": sum(a.disk_spilled_bytes for a in mine),
    }


def yarn_apps(resourcemanager_url: str, started: float, ended: float) -> list[dict[str, Any]]:
    """The ResourceManager's report of every application that started inside [started, ended], the tenant's not."""
    query = urllib.parse.urlencode({"startedTimeBegin": int(started * 1000), "startedTimeEnd": int(ended * 1000)})
    answer = get_json(f"{resourcemanager_url.rstrip('/')}/ws/v1/cluster/apps?{query}")
    return [a for a in apps_of(answer) if a.get("name") != TENANT_NAME]


def yarn_figures(apps: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Reserved vcore-seconds and MB-seconds and failed applications, from YARN's application reports."""
    apps = list(apps)
    return {
        "yarn_applications": len(apps),
        "reserved_core_s": float(sum(int(a.get("vcoreSeconds", 0)) for a in apps)),
        "reserved_mb_s": float(sum(int(a.get("memorySeconds", 0)) for a in apps)),
        "failed_applications": sum(a.get("finalStatus") not in ("SUCCEEDED", "UNDEFINED") for a in apps),
    }


def answer_problems(reference: Mapping[str, Rows], got: Mapping[str, Rows]) -> list[str]:
    """What differs from the reference, query by query; empty when identical."""
    return [f"{query}: {p}" for query, problems in compare_answers(reference, got).items() for p in problems[:3]]


def answers_at(paths: Mapping[str, str]) -> dict[str, Rows]:
    """Q1, Q3 and Q5 from the answer stages' outputs (``stage -> path`` or ``file:`` URI)."""
    out: dict[str, Rows] = {}
    for query, (stage, _) in ANSWERS.items():
        path = paths.get(stage)
        if path:
            out[query] = read_rows(urllib.parse.urlparse(path).path if path.startswith("file:") else path)
    return out


def reference_answers(tables: Path) -> dict[str, Rows]:
    """Q1, Q3 and Q5 over ``tables`` without Spark (pyarrow, tests/tpch/reference.py): the independent reference."""
    from tests.tpch import reference

    return {query: reference.records(getattr(reference, query)(tables)) for query in ANSWERS}
