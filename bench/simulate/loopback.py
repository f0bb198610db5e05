"""What item 2's loopback cluster adds to the model: few physical cores shared by everything, and Airflow.

Item 2 measures a standalone cluster whose workers ADVERTISE more cores than the machine has (2 x 4
on 2 physical cores), under one ``airflow standalone``, while other work runs on the same machine. A
task there does not run at one core's speed: every running task thread, every starting JVM (driver
and executors), every Airflow task process and the machine's other load share the physical cores.
:class:`SharedCPU` is that: egalitarian processor sharing, each runnable thread progressing at
``min(1, physical cores / (runnable threads + background load))`` of a core.

:class:`LoopbackModel` holds what the simulation charges on such a machine (CPU seconds of an
application's driver start, of an executor's start, of an Airflow task process, the scheduler's delay,
the provider's capacity-trigger poll), and :func:`fit_loopback` takes the ones measured apart (an
application's and an executor's start CPU) from ``app-start.json``; the rest are stated assumptions or
fitted.
"""

from __future__ import annotations

import csv
import heapq
import json
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.simulate.events import EventLoop

APP_START_FILE = "app-start.json"
"""Written by ``python -m bench app-start`` (an experiment that starts Spark), in the results folder; read here as a
file, never imported."""


def ps_rate(cores: float, threads: float, background: float) -> float:
    """A runnable thread's speed (cores) under processor sharing: never above one core."""
    if cores <= 0 or threads < 0 or background < 0:
        raise ValueError(
            f"processor sharing needs cores > 0, threads >= 0, background >= 0; got {cores}, {threads}, {background}"
        )
    demand = threads + background
    return 1.0 if demand <= cores else cores / demand


class SharedCPU:
    """Jobs of ``weight`` threads, each thread needing ``work`` CPU seconds, sharing ``cores`` with a load.

    Every runnable thread progresses at the same rate (:func:`ps_rate`), so one virtual clock (CPU
    seconds a thread has received) orders all completions: a job started at virtual time v ends at
    v + work, whatever starts or ends meanwhile.
    """

    def __init__(self, loop: EventLoop, cores: float, background: float) -> None:
        self.loop = loop
        self.cores = cores
        self.background = background
        self.threads = 0.0
        self.cpu_s = 0.0
        """CPU seconds given to this machine's jobs so far."""
        self._virtual = 0.0
        self._at = 0.0
        self._heap: list[tuple[float, int, float, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self._token = 0

    @property
    def rate(self) -> float:
        return ps_rate(self.cores, self.threads, self.background)

    def run(self, work: float, weight: float, callback: Callable[..., None], *args: Any) -> None:
        """Start a job now; ``callback(*args)`` when each of its threads got ``work`` CPU seconds."""
        if work < 0 or weight <= 0:
            raise ValueError(f"a CPU job needs work >= 0 and weight > 0, got {work}, {weight}")
        self._advance()
        self._seq += 1
        heapq.heappush(self._heap, (self._virtual + work, self._seq, weight, callback, args))
        self.threads += weight
        self.cpu_s += work * weight
        self._schedule()

    def _advance(self) -> None:
        now = self.loop.now
        if self.threads:
            self._virtual += (now - self._at) * self.rate
        self._at = now

    def _schedule(self) -> None:
        self._token += 1
        if self._heap:
            wait = max(0.0, (self._heap[0][0] - self._virtual) / self.rate)
            self.loop.after(wait, self._due, self._token)

    def _due(self, token: int) -> None:
        if token != self._token:
            return  # a start or an end since changed the rate: a newer event is scheduled
        self._advance()
        done = []
        while self._heap and self._heap[0][0] <= self._virtual + 1e-9:
            _, _, weight, callback, args = heapq.heappop(self._heap)
            self.threads = max(0.0, self.threads - weight)
            done.append((callback, args))
        self._schedule()
        for callback, args in done:
            callback(*args)


@dataclass(frozen=True)
class LoopbackModel:
    """What the simulation charges on item 2's machine; see the module docstring."""

    physical_cores: float = 2.0
    background_load: float = 0.0
    """Runnable threads of other work on the machine (the load average not caused by the run itself)."""
    app_cpu_s: float = 38.0
    """CPU seconds an application's start costs (spark-submit, driver JVM, SparkContext, Python)."""
    context_share: float | None = None
    """Where, in an application's start, its SparkContext begins (the event log's ApplicationStart, from
    which item 2 counts queueing): a share of ``app_cpu_s``; None: at its registration."""
    app_threads: float = 2.0
    """Threads that start runs on (its CPU seconds are spread over them)."""
    executor_cpu_s: float = 6.0
    """CPU seconds one executor JVM's start costs, launch to registration (measured apart: app-start.json)."""
    executor_warmup_cpu_s: float = 1.0
    """CPU seconds a fresh executor JVM's first task adds (class loading, JIT); fitted on item 2's run."""
    driver_job_cpu_s: float = 0.0
    """CPU seconds of the driver's work to submit each job (a phase); fitted on item 2's run."""
    airflow_task_cpu_s: float = 3.0
    """CPU seconds of one Airflow task process before it runs its work (assumed)."""
    scheduler_delay_s: float = 2.0
    """Airflow's scheduler loop: an upstream's end to the downstream task's process start (assumed)."""
    trigger_poll_s: float = 1.0
    """The capacity trigger's poll (the connection's capacity_poll_interval in item 2)."""
    trigger_floor_s: float = 30.0
    """trigger_min_wait: a deferred region's capacity trigger looks no sooner (triggers/settle.py; the
    provider's default is 10 s, item 2's harness connection sets 30 s: bench/shared_cluster/policies.py)."""
    fit: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for name in (
            "background_load",
            "app_cpu_s",
            "executor_cpu_s",
            "driver_job_cpu_s",
            "airflow_task_cpu_s",
            "scheduler_delay_s",
            "trigger_floor_s",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"loopback model {name} must be >= 0, got {getattr(self, name)!r}")
        if self.context_share is not None and not 0 <= self.context_share <= 1:
            raise ValueError(f"loopback model context_share must be in [0, 1], got {self.context_share!r}")
        for name in ("physical_cores", "app_threads", "trigger_poll_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"loopback model {name} must be > 0, got {getattr(self, name)!r}")

    def with_background(self, load: float) -> LoopbackModel:
        return replace(self, background_load=load)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fit_loopback(results: Path, driver_stage_s: float = 0.0, **overrides: Any) -> LoopbackModel:
    """An application's and an executor's start CPU, measured apart: ``app-start.json`` (``python -m
    bench.app_start``).

    What a trivial PySpark application costs the machine from launch to its first job and stop, on an idle
    machine. Also recorded, not used: compare-runs.csv's (process CPU - task CPU) / applications of variant b
    (a cold application per stage, local[2]) less the driver's per-stage work: an application's whole-life
    overhead (its driver's work around every job as well as its start), which the loopback model charges
    per job instead (``driver_job_cpu_s``, fitted). Charging all of it before the first job cannot be
    right: item 2's dynamic run started 16 applications at once and they reached their first jobs within
    about 150 s on 2 cores, where 16 x 36 CPU s would take 290 s at the least.
    """
    try:
        start = json.loads((results / APP_START_FILE).read_text())
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no {results / APP_START_FILE}: python -m bench app-start measures an application's start"
        ) from None
    per_scale: dict[str, list[float]] = {}
    with (results / "compare-runs.csv").open() as handle:
        for row in csv.DictReader(handle):
            if row["variant"] == "b" and row["ok"] == "True":
                apps = float(row["applications"])
                # (b) runs one stage per application: the driver's per-stage work is charged apart.
                per_scale.setdefault(row["scale"], []).append(
                    (float(row["process_cpu_s"]) - float(row["task_cpu_s"])) / apps - driver_stage_s
                )
    medians = {s: round(statistics.median(v), 1) for s, v in sorted(per_scale.items())}
    fitted = {
        "app_cpu_s": f"median CPU of a trivial application's launch, first job and stop ({APP_START_FILE}:"
        f" {start['cpu_s']} CPU s, {start['median_wall_s']} s wall each, {start['master']})",
        "context_share": f"median (ApplicationStart - launch) / (first job - launch), {APP_START_FILE}:"
        f" {start['context_share']}",
        "app_life_cpu_per_scale_s": medians,
        "assumed": ["app_threads", "airflow_task_cpu_s", "scheduler_delay_s"],
        "background_load": "not measured: item 2 recorded only the 1-minute load average at each policy's start",
    }
    executor = start["executor"]
    fitted["executor_cpu_s"] = (
        f"median CPU of an executor JVM from launch to registration on a one-worker standalone cluster"
        f" ({APP_START_FILE}: {executor['cpu_s']} CPU s, {executor['median_wall_s']} s wall)"
    )
    values: dict[str, Any] = {
        "app_cpu_s": round(float(start["median_cpu_s"]), 2),
        "context_share": float(start["median_context_share"]),
        "executor_cpu_s": round(float(executor["median_cpu_s"]), 2),
        "fit": fitted,
    }
    return LoopbackModel(**(values | overrides))
