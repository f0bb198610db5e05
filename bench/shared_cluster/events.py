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

from bench.lib.spark_metrics import event_lines, events


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
    task_spans: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Executor id -> (its first task's launch, its last task's finish)."""

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

    @property
    def idle_core_s(self) -> dict[str, float]:
        """Reserved but unused core-seconds by where they fall in each executor's life.

        ``never_used``: executors that ran no task; ``before_first_task`` / ``after_last_task``: from an
        executor's registration to its first task, from its last task to its release; ``between_tasks``: the
        rest (cores idle while the executor lived between or beside its tasks).
        """
        out = {"never_used": 0.0, "before_first_task": 0.0, "after_last_task": 0.0}
        for key, (added, removed, cores) in self.executors.items():
            until = removed if removed is not None else self.end
            if until is None:
                continue
            span = self.task_spans.get(key)
            if span is None:
                out["never_used"] += max(0.0, until - added) * cores
            else:
                out["before_first_task"] += max(0.0, span[0] - added) * cores
                out["after_last_task"] += max(0.0, until - span[1]) * cores
        out["between_tasks"] = max(0.0, self.reserved_core_s - self.used_core_s - sum(out.values()))
        return out


def parse_events(lines: Iterable[str]) -> AppUsage:
    """An application's usage from its event log lines (JSON per line; unknown events and a partial last line are
    skipped)."""
    app = AppUsage()
    for event in events(lines):
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
                executor = info.get("Executor ID")
                if executor is not None:
                    first, last = app.task_spans.get(str(executor), (launch / 1000, finish / 1000))
                    app.task_spans[str(executor)] = (min(first, launch / 1000), max(last, finish / 1000))
    return app


def read_apps(folder: Path) -> list[AppUsage]:
    """Every finished application whose plain JSON event log (a file or a rolling log's folder) is in ``folder``."""
    entries = sorted(folder.iterdir()) if folder.is_dir() else []
    return [parse_events(event_lines(e)) for e in entries if not e.name.endswith(".inprogress")]


def idle_totals(apps: Iterable[AppUsage]) -> dict[str, float]:
    """:attr:`AppUsage.idle_core_s` summed over ``apps``, part by part."""
    totals: dict[str, float] = {}
    for app in apps:
        for part, seconds in app.idle_core_s.items():
            totals[part] = totals.get(part, 0.0) + seconds
    return totals


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.shared_cluster.events FOLDER``: a policy's event logs' reserved, used and idle core-seconds.

    The harness keeps each policy's event logs in its work folder (``events-<policy>``).
    """
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print(main.__doc__, file=sys.stderr)
        return 2
    apps = [a for a in read_apps(Path(args[0])) if a.end is not None]
    totals = {
        "applications": len(apps),
        "reserved_core_s": round(sum(a.reserved_core_s for a in apps)),
        "used_core_s": round(sum(a.used_core_s for a in apps)),
        "idle_core_s": {part: round(seconds) for part, seconds in idle_totals(apps).items()},
    }
    print(json.dumps(totals, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
