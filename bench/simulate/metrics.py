"""What one simulation measured, and the figures it reports: makespan, throughput, queueing, latency, and the
executor core-seconds reserved and used (with where the reserved ones went)."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class Metrics:
    """What one simulation measured; ``summary`` turns it into the reported figures."""

    policy: str
    cluster_cores: int
    executor_cores: int
    reserved_core_s: float = 0.0
    """Executor cores x time from grant (the place is taken) to release."""
    added_core_s: float = 0.0
    """Executor cores x time from the executor's registration (an event log's ExecutorAdded) to release."""
    app_queue_sum_s: float = 0.0
    """Sum over applications of registration to first executor added (what item 2 reads from event logs)."""
    used_core_s: float = 0.0
    idle_driver_core_s: float = 0.0
    """Ready executor cores without a task while their driver works (starting, planning a stage)."""
    idle_slot_core_s: float = 0.0
    """Ready executor cores without a task while no task is left for them (narrow phases, waves' tails)."""
    applications: int = 0
    tasks: int = 0
    spilled_tasks: int = 0
    """Tasks whose data in memory exceeded their execution memory (the cost model's spill term applied)."""
    arrivals: list[float] = field(default_factory=list)
    first_executor: list[float] = field(default_factory=list)
    finishes: list[float] = field(default_factory=list)
    capacity_outcomes: Counter[str] = field(default_factory=Counter)
    capacity_decisions: int = 0
    planner_calls: int = 0
    planner_s: float = 0.0
    events: int = 0
    wall_s: float = 0.0
    admissions: dict[int, list[list[Any]]] = field(default_factory=dict)
    """provider: per run index, each region's [name, executors requested, admitted, admitted at, ended at]."""
    slowest: list[dict[str, Any]] = field(default_factory=list)
    horizon_s: float | None = None
    """Closed-loop (streams): the time the runs finished were counted at; None for arrivals in time."""

    def summary(self) -> dict[str, Any]:
        """The reported figures: the runs' makespan, throughput, queueing and latency, then the core-seconds."""
        arrivals, finishes, firsts = self._finished()
        start = min(arrivals, default=0.0)
        end = self.horizon_s if self.horizon_s is not None else max(finishes)
        makespan = end - start
        queue = sorted(f - a for f, a in zip(firsts, arrivals, strict=True))
        latency = sorted(f - a for f, a in zip(finishes, arrivals, strict=True))
        return {
            "policy": self.policy,
            "runs": len(finishes),
            "makespan_s": round(makespan, 3),
            "throughput_runs_per_h": round(len(finishes) / makespan * 3600, 3) if makespan else None,
            # How long until most runs were done: a few long runs can set the makespan alone.
            "finish_p95_s": round(_pct(sorted(finishes), 95) - start, 3),
            "finish_p99_s": round(_pct(sorted(finishes), 99) - start, 3),
            "queue_s": {"mean": _mean(queue), "p50": _pct(queue, 50), "p95": _pct(queue, 95)},
            "run_latency_s": {
                "mean": _mean(latency),
                "p50": _pct(latency, 50),
                "p95": _pct(latency, 95),
            },
            **self._core_seconds(makespan),
            "applications": self.applications,
            "tasks": self.tasks,
            "spilled_tasks": self.spilled_tasks,
            "capacity_outcomes": dict(self.capacity_outcomes),
            "capacity_decisions": self.capacity_decisions,
            "planner_calls": self.planner_calls,
            "planner_s": round(self.planner_s, 2),
            "events": self.events,
            "wall_s": round(self.wall_s, 2),
            "slowest_runs": self.slowest,
        }

    def _finished(self) -> tuple[list[float], list[float], list[float]]:
        """The arrivals, finishes and first executors of the runs that finished."""
        # Closed-loop, the runs finished by the horizon: started ones unfinished and unstarted are NaN.
        done = [
            (a, f, q)
            for a, f, q in zip(self.arrivals, self.finishes, self.first_executor, strict=True)
            if not math.isnan(f)
        ]
        arrivals, finishes, firsts = (list(column) for column in zip(*done, strict=True)) if done else ([], [], [])
        return arrivals, finishes, firsts

    def _core_seconds(self, makespan: float) -> dict[str, Any]:
        """Reserved, added, queued and used core-seconds, where the reserved ones went, and their shares."""
        return {
            "reserved_core_s": round(self.reserved_core_s, 1),
            "added_core_s": round(self.added_core_s, 1),
            "app_queue_sum_s": round(self.app_queue_sum_s, 1),
            "used_core_s": round(self.used_core_s, 1),
            # reserved = starting (grant to ready) + used + idle while the driver works + idle with no task.
            "reserved_breakdown_core_s": {
                "starting": round(self.reserved_core_s - self.added_core_s, 1),
                "used": round(self.used_core_s, 1),
                "idle_driver": round(self.idle_driver_core_s, 1),
                "idle_no_task": round(self.idle_slot_core_s, 1),
            },
            "used_over_reserved": round(self.used_core_s / self.reserved_core_s, 4) if self.reserved_core_s else None,
            "reserved_over_cluster": round(self.reserved_core_s / (self.cluster_cores * makespan), 4)
            if makespan
            else None,
        }


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 3) if values else 0.0


def _pct(values: Sequence[float], p: float) -> float:
    return round(values[min(len(values) - 1, math.ceil(p / 100 * len(values)) - 1)], 3) if values else 0.0
