"""What an application reserved and used, from its Spark event log.

Reserved: every executor's cores for as long as it lived (``ExecutorAdded`` to ``ExecutorRemoved``, or to
the application's end). Used: every task's cores for as long as it ran (launch to finish, times
``spark.task.cpus``). Queued: from the application's start to its first executor.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class AppUsage:
    """One application's times (seconds since the epoch) and core-seconds."""

    app_id: str = ""
    name: str = ""
    start: float | None = None
    end: float | None = None
    task_cpus: int = 1
    executors: dict[str, tuple[float, float | None, int]] = field(default_factory=dict)
    """Executor id -> (added, removed or None, cores)."""
    used_core_s: float = 0.0
    tasks: int = 0

    @property
    def first_executor(self) -> float | None:
        return min((added for added, _, _ in self.executors.values()), default=None)

    @property
    def queued_s(self) -> float | None:
        """Start to first executor; None when it never got one."""
        first = self.first_executor
        return None if first is None or self.start is None else max(0.0, first - self.start)

    @property
    def reserved_core_s(self) -> float:
        total = 0.0
        for added, removed, cores in self.executors.values():
            until = removed if removed is not None else self.end
            if until is not None:
                total += max(0.0, until - added) * cores
        return total


def parse_events(lines: Iterable[str]) -> AppUsage:
    """An application's usage from its event log lines (JSON per line; unknown events are skipped)."""
    app = AppUsage()
    for line in lines:
        line = line.strip()
        if not line:
            continue
        event = json.loads(line)
        kind = event.get("Event")
        if kind == "SparkListenerApplicationStart":
            app.app_id, app.name = str(event.get("App ID", "")), str(event.get("App Name", ""))
            app.start = event["Timestamp"] / 1000
        elif kind == "SparkListenerApplicationEnd":
            app.end = event["Timestamp"] / 1000
        elif kind == "SparkListenerEnvironmentUpdate":
            props = event.get("Spark Properties") or {}
            app.task_cpus = int(props.get("spark.task.cpus", 1))
        elif kind == "SparkListenerExecutorAdded":
            cores = int((event.get("Executor Info") or {}).get("Total Cores", 1))
            app.executors[str(event["Executor ID"])] = (event["Timestamp"] / 1000, None, cores)
        elif kind == "SparkListenerExecutorRemoved":
            key = str(event["Executor ID"])
            if key in app.executors:
                added, _, cores = app.executors[key]
                app.executors[key] = (added, event["Timestamp"] / 1000, cores)
        elif kind == "SparkListenerTaskEnd":
            info = event.get("Task Info") or {}
            launch, finish = info.get("Launch Time"), info.get("Finish Time")
            if launch and finish:
                app.used_core_s += (finish - launch) / 1000 * app.task_cpus
                app.tasks += 1
    return app


def read_apps(folder: Path) -> list[AppUsage]:
    """Every finished application whose plain JSON event log (a file or a rolling log's folder) is in ``folder``."""
    from bench.compare.measure import _event_files, _lines

    entries = sorted(folder.iterdir()) if folder.is_dir() else []
    return [parse_events(_lines(_event_files(e))) for e in entries if not e.name.endswith(".inprogress")]
