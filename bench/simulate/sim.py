"""Run a workload on a simulated cluster under one policy and measure what it reserved and used.

Policies (docs/simulation.md):

- ``fixed``: every DAG task (stage) is one application holding ``fixed_executors`` executors from its
  registration to its end; Spark's default split size and 200 shuffle partitions coalesced by AQE.
- ``dynamic``: the same applications with dynamic allocation: executors asked for after a backlog of
  ``backlog_timeout_s``, doubling each further second, idle ones (holding no shuffle data) removed
  after ``idle_timeout_s``.
- ``provider``: the provider as it runs a region on a cluster (``execution/executor_lifecycle.py``): one
  application per region, sized by the planning core as the provider's ``decide_region`` does
  (:mod:`bench.simulate.decision`: parallelism from the bytes consumed, ``size_region``) and admitted by
  ``decide_capacity`` against the free executors (the provider's capacity gate, modelled here); the
  capacity ledger keeps the admitted places until the application's first executor is added; executors
  are asked for at the first job (dynamic allocation from 0, the backlog ramp, bounded by the admitted
  count) and released after ``idle_timeout_s`` idle (shuffle tracking's timeout the same).
- ``provider+start``: as ``provider``, with every admitted executor asked for when the application
  registers (the connection's ``executors_from="start"``).
- ``provider+held``: the admitted executors held from registration to the region's end (dynamic
  allocation off: a connection's ``spark.dynamicAllocation.enabled=false``, and the provider before
  ``executor_lifecycle``).
- ``provider+grow``: as ``provider``, but the bound is the executors the region REQUESTED: a region
  admitted smaller asks for the rest as executors free up (a change to the provider's decisions this
  simulator proposes, not what it does).
- ``provider+queue``: the provider with the connection's ``admission="cluster_queue"``: every region asks
  the cluster manager for all the executors it requested (``queue_capacity``; at its first job, bounded by
  the request) and waits in the cluster manager's queue like any application; only a region that could
  never fit is refused; nothing is held in the ledger.

``streams`` (with ``horizon_s``) runs the workload closed-loop instead of at its arrival times, as TPC's
throughput tests do: that many streams each start their next run when their last one ends, and the
runs finished by the horizon are counted.

Every application runs Spark's schema job before it reads a parquet input (one task per ``read``, what
``spark.read.parquet`` without a schema costs), then each stage's scan and shuffle phases.

With a :class:`~bench.simulate.loopback.LoopbackModel`, every start, executor start and task is CPU work
on a few shared physical cores (item 2's loopback cluster) and each DAG task pays Airflow's delay and
task-process start; without one, each takes its cost model's seconds on its own core.

A stage runs as a scan phase (file splits) then a shuffle phase; a phase's tasks are equal, each
taking ``CostModel.task_seconds`` on one core. Stages of one application run one after another.
"""

from __future__ import annotations

import math
import time
from collections import Counter, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_provider_finegrained.planning import (
    CapacityOutcome,
    ClusterProfile,
    ExchangeMode,
    ExecutorRequest,
    ParallelismConfig,
    WorkerCapacity,
    decide_capacity,
    queue_capacity,
)
from bench.simulate.cluster import Cluster, ClusterSpec
from bench.simulate.costs import SHUFFLE_FRACTION, CostModel
from bench.simulate.decision import StageBytes, decide_region_sizing, forward_group_peers
from bench.simulate.events import EventLoop
from bench.simulate.loopback import LoopbackModel, SharedCPU
from bench.simulate.workload import DagRun

MiB = 2**20
POLICIES = ("fixed", "dynamic", "provider", "provider+start", "provider+held", "provider+grow", "provider+queue")
RELEASING = ("provider", "provider+start", "provider+grow", "provider+queue")
"""The provider's variants whose region applications give back idle executors (dynamic allocation)."""
FOOTER_BYTES = 64 * 2**10
"""What a schema job's one task reads: a parquet footer."""
FILE_BYTES = 128 * MiB
"""External tables are stored as parquet files of at most this size."""


@dataclass(frozen=True)
class PolicySpec:
    """A policy and its settings; the defaults are Spark's and the provider's own."""

    name: str
    fixed_executors: int = 4
    default_parallelism: int = 16
    """``spark.default.parallelism`` for Spark's split size and AQE (the fixed application's cores)."""
    shuffle_partitions: int = 200
    advisory_partition_bytes: int = 64 * MiB
    max_executors: int | None = None
    backlog_timeout_s: float = 1.0
    idle_timeout_s: float = 60.0
    max_parallelism: int = 128
    """The provider's ParallelismConfig default."""
    avg_bytes_per_task: int = 64 * MiB
    shuffle_timeout_s: float | None = None
    """The releasing provider variants: an idle executor holding shuffle data is released after this (None:
    Spark's default, kept while the application runs)."""
    min_admit_share: float = 0.0
    """The provider's variants: a region the capacity decision would run smaller waits instead when it would get
    fewer than this share of the executors it asked for (a change this simulator tries, not what the provider
    does; 0: the provider's decision as it is)."""

    def __post_init__(self) -> None:
        if self.name not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {self.name!r}")
        if self.fixed_executors < 1 or self.default_parallelism < 1 or self.shuffle_partitions < 1:
            raise ValueError(
                f"policy {self.name}: fixed_executors, default_parallelism and shuffle_partitions must be >= 1"
            )
        if not 0 <= self.min_admit_share <= 1:
            raise ValueError(f"policy {self.name}: min_admit_share must be in [0, 1], got {self.min_admit_share!r}")


@dataclass(frozen=True)
class Phase:
    tasks: int
    task_s: float
    reads_shuffle: bool = False
    """A reduce phase: it reads the previous phase's shuffle output (held by the executors that wrote it)."""
    driver_s: float = 0.0
    """The driver's own work before this phase's tasks (a stage's planning, its output's commit and
    measurement): the application's executors wait meanwhile."""


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
        # Closed-loop, the runs finished by the horizon: started ones unfinished and unstarted are NaN.
        done = [
            (a, f, q)
            for a, f, q in zip(self.arrivals, self.finishes, self.first_executor, strict=True)
            if not math.isnan(f)
        ]
        arrivals, finishes, firsts = (list(column) for column in zip(*done, strict=True)) if done else ([], [], [])
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
            "applications": self.applications,
            "tasks": self.tasks,
            "capacity_outcomes": dict(self.capacity_outcomes),
            "capacity_decisions": self.capacity_decisions,
            "planner_calls": self.planner_calls,
            "planner_s": round(self.planner_s, 2),
            "events": self.events,
            "wall_s": round(self.wall_s, 2),
            "slowest_runs": self.slowest,
        }


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 3) if values else 0.0


def _pct(values: Sequence[float], p: float) -> float:
    return round(values[min(len(values) - 1, math.ceil(p / 100 * len(values)) - 1)], 3) if values else 0.0


@dataclass(frozen=True)
class _RegionPlan:
    request: ExecutorRequest
    phases: tuple[Phase, ...]
    ran_with: dict[str, int]


_PLAN_CACHE: dict[Any, _RegionPlan] = {}
"""Region decisions by (cluster, cost model, parallelism config, shape, tables, region), across simulations."""


class _Run:
    __slots__ = ("done_stages", "first_grant", "index", "inputs", "outputs", "ran_with", "run", "units_left")

    def __init__(self, run: DagRun, index: int, units: int) -> None:
        self.run = run
        self.index = index
        self.inputs, self.outputs = run.stage_bytes()
        self.ran_with: dict[str, int] = {}
        self.units_left = units
        self.done_stages: set[str] = set()
        self.first_grant = math.inf


class _App:
    """One Spark application: its phases, executors and task slots."""

    __slots__ = (
        "activity",
        "blocked",
        "cold",
        "done",
        "granted",
        "held",
        "mark",
        "pending",
        "phase",
        "phases",
        "queued_at",
        "ready",
        "record",
        "run",
        "running",
        "shuffle_holders",
        "stages",
        "step",
        "target",
        "ticking",
        "want",
    )  # fmt: skip

    def __init__(self, run: _Run, stages: tuple[str, ...], phases: list[Phase], want: int) -> None:
        self.run = run
        self.stages = stages
        self.phases = phases
        self.want = want
        self.phase = 0
        self.pending = phases[0].tasks
        self.running = 0
        self.granted = 0  # executors granted (starting or ready), not yet released
        self.held = 0  # places the capacity ledger keeps for it until its first executor is added
        self.ready = 0
        self.done = False
        self.target = 0  # dynamic allocation's executor target
        self.step = 1
        self.ticking = False
        self.activity = 0
        self.shuffle_holders = 0
        self.cold = 0  # ready executors that have not run a task yet
        # When its SparkContext began (queueing counts from it); -1 before then, and after its first executor.
        self.queued_at = -1.0
        self.blocked = False  # the driver works (a stage's planning): no task starts
        self.record: list[Any] | None = None  # provider: [region, requested, admitted, admitted at, ended at]
        self.mark = 0.0  # the last change of ready executors, running tasks or blocked (idle accounting)


class Simulation:
    """One policy over one workload on one cluster; ``run()`` returns the metrics."""

    def __init__(
        self,
        cluster: ClusterSpec,
        cost: CostModel,
        policy: PolicySpec,
        runs: Sequence[DagRun],
        loopback: LoopbackModel | None = None,
        streams: int | None = None,
        horizon_s: float | None = None,
    ) -> None:
        if not runs:
            raise ValueError("a simulation needs at least one DAG run")
        if (streams is None) != (horizon_s is None) or (streams is not None and (streams < 1 or (horizon_s or 0) <= 0)):
            raise ValueError(
                f"closed-loop runs need both streams >= 1 and horizon_s > 0, got streams={streams!r}, "
                f"horizon_s={horizon_s!r}"
            )
        self.streams = streams
        self.horizon_s = horizon_s
        self._next_run = 0
        self._ran_dry: float | None = None  # closed loop: when a stream first found no run left to start
        self._granted_live = 0  # executors granted and not released (closes the books at a horizon)
        self._added_live = 0  # of those, registered
        self.spec = cluster
        self.cost = cost
        self.policy = policy
        self.runs = runs
        self.loop = EventLoop()
        self.provider = policy.name.startswith("provider")
        self.release = policy.name in RELEASING
        self.at_first_job = policy.name in ("provider", "provider+grow", "provider+queue")
        self.grow = policy.name == "provider+grow"
        self.queue = policy.name == "provider+queue"
        self.scales_executors = policy.name == "dynamic" or self.release
        self.loopback = loopback
        self.cpu = SharedCPU(self.loop, loopback.physical_cores, loopback.background_load) if loopback else None
        # A fresh executor JVM's first task (class loading, JIT): the cost model's figure was fitted in
        # local mode, where the driver's JVM had warmed up already; a standalone executor is its own JVM.
        self.warmup_s = loopback.executor_warmup_cpu_s if loopback else cost.warmup_s
        # The driver's work to submit each job (planning, AQE, a Python round trip): fitted with the loopback
        # model on item 2's run, where it shows as gaps between an application's jobs; none without it.
        self.driver_job_s = loopback.driver_job_cpu_s if loopback else 0.0
        # Where in an application's start its event log begins (ApplicationStart: the SparkContext's
        # beginning), measured apart on the loopback machine; never after its registration.
        registered = cost.app_registered_share
        context = loopback.context_share if loopback else None
        self.context_share = registered if context is None else min(context, registered)
        self.cluster = Cluster(cluster, self._granted)
        self.metrics = Metrics(policy.name, cluster.total_cores, cluster.executor_cores)
        self.spe = cluster.executor_cores  # one core per task
        self.waiting_regions: deque[tuple[_Run, str]] = deque()
        self.profile = ClusterProfile(
            total_cores=cluster.total_cores,
            total_memory=cluster.nodes * cluster.node_memory,
            executor_cores=cluster.executor_cores,
            executor_memory=cluster.executor_memory,
            memory_expansion=cost.memory_expansion,
        )
        self.config = ParallelismConfig(
            max_parallelism=policy.max_parallelism, avg_bytes_per_task=policy.avg_bytes_per_task
        )
        self._unit_deps: dict[tuple[str, str], dict[str, tuple[str, ...]]] = {}
        self._stage_units: dict[str, dict[str, tuple[str, ...]]] = {}
        # (shape, its tables' bytes, region, forward-group peers that ran) -> the region's plan
        self._region_plans: dict[tuple[Any, ...], _RegionPlan] = {}

    # --- the run ---------------------------------------------------------------------------------

    def run(self) -> Metrics:
        started = time.perf_counter()
        m = self.metrics
        m.arrivals = [r.arrival for r in self.runs]
        m.first_executor = [math.inf] * len(self.runs)
        m.finishes = [math.nan] * len(self.runs)
        if self.streams is not None and self.horizon_s is not None:
            m.arrivals = [math.nan] * len(self.runs)
            m.horizon_s = self.horizon_s
            for _ in range(min(self.streams, len(self.runs))):
                self._start_next()
            self.loop.run(until=self.horizon_s)
            # Executors still held at the horizon count up to it.
            self.loop.now = self.horizon_s
            cores = self.spec.executor_cores * self.horizon_s
            m.reserved_core_s += self._granted_live * cores
            m.added_core_s += self._added_live * cores
            if self._ran_dry is not None:
                raise RuntimeError(
                    f"closed loop: a stream had no run left to start at {self._ran_dry:.0f} s, before the horizon "
                    f"({len(self.runs)} runs); give more runs"
                )
        else:
            for index, run in enumerate(self.runs):
                self.loop.at(run.arrival, self._arrive, run, index)
            self.loop.run()
        unfinished = [i for i, f in enumerate(m.finishes) if math.isnan(f)]
        if unfinished and self.streams is None:
            raise RuntimeError(
                f"{len(unfinished)} run(s) never finished (first: run {self.runs[unfinished[0]].run_id})"
            )
        m.events = self.loop.processed
        m.wall_s = time.perf_counter() - started
        # The five runs that ended last, and (provider) how each region was admitted: what sets a makespan.
        finished = [i for i in range(len(self.runs)) if not math.isnan(m.finishes[i])]
        for index in sorted(finished, key=lambda i: m.finishes[i])[-5:]:
            run = self.runs[index]
            m.slowest.append(
                {
                    "run_id": run.run_id,
                    "shape": run.shape.name,
                    "scale": round(run.scale, 3),
                    "arrival": round(m.arrivals[index], 1),
                    "finish": round(m.finishes[index], 1),
                    "regions": m.admissions.get(index, []),
                }
            )
        return m

    def _units(self, run: DagRun) -> dict[str, tuple[str, ...]]:
        """unit -> its stages: a region for the provider, a stage for the others (one application each)."""
        plan = run.shape.plan
        if self.provider:
            return plan.regions
        key = run.shape.name
        if key not in self._stage_units:
            self._stage_units[key] = {name: (name,) for name in plan.stages}
        return self._stage_units[key]

    def _deps(self, run: DagRun) -> dict[str, tuple[str, ...]]:
        """unit -> the stages outside it whose outputs it reads (cached per DAG shape)."""
        key = (run.shape.name, self.policy.name)
        if key not in self._unit_deps:
            plan = run.shape.plan
            deps = {}
            for unit, members in self._units(run).items():
                inside = set(members)
                deps[unit] = tuple(
                    sorted({e.producer for s in members for e in plan.stages[s].inputs if e.producer not in inside})
                )
            self._unit_deps[key] = deps
        return self._unit_deps[key]

    def _start_next(self) -> None:
        """Closed loop: the stream whose run ended starts the next run not yet started."""
        index = self._next_run
        if index >= len(self.runs):
            if self._ran_dry is None:
                self._ran_dry = self.loop.now
            return
        self._next_run += 1
        self.metrics.arrivals[index] = self.loop.now
        self._arrive(self.runs[index], index)

    def _arrive(self, run: DagRun, index: int) -> None:
        units = self._units(run)
        state = _Run(run, index, len(units))
        for unit, deps in self._deps(run).items():
            if not deps:
                self._launch(state, unit, units[unit])

    def _unit_done(self, state: _Run, stages: tuple[str, ...]) -> None:
        state.done_stages.update(stages)
        state.units_left -= 1
        if state.units_left == 0:
            self.metrics.finishes[state.index] = self.loop.now
            if self.streams is not None:
                self._start_next()
            return
        units = self._units(state.run)
        # A unit starts once every stage it reads from is done; launched units are those whose deps
        # include one of the stages just finished (each unit starts exactly once, at its last input).
        finished = set(stages)
        for unit, deps in self._deps(state.run).items():
            if deps and finished.intersection(deps) and state.done_stages.issuperset(deps):
                self._launch(state, unit, units[unit])

    # --- launching an application -----------------------------------------------------------------

    def _launch(self, state: _Run, unit: str, stages: tuple[str, ...]) -> None:
        if self.loopback is not None:
            # Airflow: the scheduler queues the unit's task(s), each a fresh task process.
            self._airflow_start(len(stages), self._launch_now, state, unit, stages)
        else:
            self._launch_now(state, unit, stages)

    def _airflow_start(self, tasks: int, callback: Any, *args: Any) -> None:
        assert self.loopback is not None and self.cpu is not None
        cpu, work = self.cpu, self.loopback.airflow_task_cpu_s
        self.loop.after(self.loopback.scheduler_delay_s, cpu.run, work, float(tasks), callback, *args)

    def _launch_now(self, state: _Run, unit: str, stages: tuple[str, ...]) -> None:
        if self.provider:
            self._launch_region(state, unit)
            return
        phases = self._default_phases(state, stages[0])
        self._start_app(_App(state, stages, phases, self.policy.fixed_executors))

    def _start_app(self, app: _App) -> None:
        """The application's start in three parts: to its SparkContext's beginning (an event log's
        ApplicationStart), to its registration (a static application's executors are launched now), then the
        driver's own start before its first job."""
        self.metrics.applications += 1
        self._app_start_part(app, self.context_share, self._context_began)

    def _context_began(self, app: _App) -> None:
        app.queued_at = self.loop.now
        self._app_start_part(app, self.cost.app_registered_share - self.context_share, self._registered)

    def _app_start_part(self, app: _App, share: float, callback: Any) -> None:
        if self.cpu is not None and self.loopback is not None:
            threads = self.loopback.app_threads
            self.cpu.run(self.loopback.app_cpu_s * share / threads, threads, callback, app)
        else:
            self.loop.after(self.cost.app_start_s * share, callback, app)

    def _registered(self, app: _App) -> None:
        self._account(app)
        app.blocked = True
        if self.at_first_job:
            # Asked for at the first job (_backlog), from the ledger's places first; cluster_queue holds none.
            app.held = 0 if self.queue else app.want
        elif self.provider:
            app.target = app.want  # initial = max = what the capacity decision admitted
            self._granted(app, app.want)  # places held since the capacity decision
        elif self.policy.name == "fixed":
            self.cluster.request(app, app.want)
        self._app_start_part(app, 1.0 - self.cost.app_registered_share, self._driver_started)

    def _driver_started(self, app: _App) -> None:
        self._account(app)
        app.blocked = False
        self._driver_work(app)
        self._job_submitted(app)
        self._fill(app)

    def _default_phases(self, state: _Run, stage: str) -> list[Phase]:
        """Spark's defaults: split size from default parallelism, 200 shuffle partitions coalesced by AQE."""
        p = self.policy
        read = state.inputs[stage]
        split = min(128 * MiB, max(4 * MiB, read / p.default_parallelism))
        files = self._file_inputs(state, stage, set())
        scan = _scan_tasks(files, split)
        shuffled = read * SHUFFLE_FRACTION
        target = min(p.advisory_partition_bytes, max(1 * MiB, shuffled / p.default_parallelism))
        reduce = min(p.shuffle_partitions, max(1, math.ceil(shuffled / target)))
        share = self.spec.task_memory()
        return [
            *self._schema_phases(len(files), share),
            Phase(scan, self.cost.task_seconds(read / scan, share), driver_s=self.cost.driver_stage_s),
            Phase(reduce, self.cost.task_seconds(shuffled / reduce, share), reads_shuffle=True),
        ]

    # --- the provider: the planning core decides each region (bench.simulate.decision) --------------------

    def _launch_region(self, state: _Run, region: str, retry: bool = False) -> bool:
        run = state.run
        planned = self._region_plan(state, region)
        state.ran_with.update(planned.ran_with)
        # Places neither granted nor held for an admitted region; executors other applications already
        # asked for (a releasing variant asking again) come first.
        free = self.cluster.free if self.cluster.waiting == 0 or self.queue else 0
        workers = [
            WorkerCapacity(
                free_cores=free * self.spec.executor_cores,
                free_memory=free * self.spec.executor_footprint,
                total_cores=self.spec.node_cores,
                total_memory=self.spec.node_memory,
            )
        ]
        capacity = (queue_capacity if self.queue else decide_capacity)(planned.request, workers)
        self.metrics.capacity_decisions += 1
        if capacity.outcome is CapacityOutcome.IMPOSSIBLE:
            raise RuntimeError(f"run {run.run_id} {region}: {capacity.message}")
        too_small = capacity.executors < self.policy.min_admit_share * planned.request.executors
        if not capacity.can_run or too_small:
            if not retry:
                self.metrics.capacity_outcomes["wait"] += 1
                if self.loopback is None:
                    self.waiting_regions.append((state, region))
            if self.loopback is not None:
                # The deferred task's capacity trigger looks again each poll, no sooner than its floor.
                first = max(self.loopback.trigger_floor_s, self.loopback.trigger_poll_s) if not retry else 0.0
                self.loop.after(first or self.loopback.trigger_poll_s, self._poll_capacity, state, region)
            return False
        self.metrics.capacity_outcomes[capacity.outcome.value] += 1
        # The provider's reservation ledger holds the granted places until the application registers (its
        # first executor, for the variants asking at the first job), so regions admitted meanwhile do not
        # count the same free executors twice.
        if not self.queue:
            self.cluster.hold(capacity.executors)
        app = _App(state, run.shape.plan.regions[region], list(planned.phases), capacity.executors)
        app.record = [region, planned.request.executors, capacity.executors, round(self.loop.now, 1), None]
        self.metrics.admissions.setdefault(state.index, []).append(app.record)
        if retry and self.loopback is not None:
            self._airflow_start(1, self._start_app, app)  # the trigger fired: the task resumes in a new process
        else:
            self._start_app(app)
        return True

    def _poll_capacity(self, state: _Run, region: str) -> None:
        if self.cluster.free and self.cluster.waiting == 0:
            self._launch_region(state, region, retry=True)  # schedules the next poll itself if it cannot run
        else:
            self.loop.after(self.loopback.trigger_poll_s if self.loopback else 1.0, self._poll_capacity, state, region)

    def _region_plan(self, state: _Run, region: str) -> _RegionPlan:
        """The planner's decision for a region, memoized per (DAG shape, input table sizes, region).

        A run's bytes are a function of its shape and its tables, so runs drawn at the same scale get the
        same decision; the memo keeps the planner's calls to one per distinct case.
        """
        run = state.run
        plan = run.shape.plan
        # Forward-group peers in regions that already ran: the group's value is theirs (as the runner does).
        peers = {p: state.ran_with[p] for p in forward_group_peers(plan, region) if p in state.ran_with}
        key = (run.shape.name, tuple(sorted(run.table_bytes.items())), region, tuple(sorted(peers.items())))
        cached = self._region_plans.get(key)
        if cached is not None:
            return cached
        # The provider's variants decide alike: one planner call per case across simulations.
        shared_key = (self.spec, self.cost, self.config, key)
        cached = _PLAN_CACHE.get(shared_key)
        if cached is not None:
            self._region_plans[key] = cached
            return cached
        members = plan.regions[region]
        started = time.perf_counter()
        inputs = region_inputs(run, state.outputs, state.ran_with, members)
        sizing = decide_region_sizing(plan, region, inputs, self.config, self.profile, ran_with=peers)
        request = ExecutorRequest(
            executors=sizing.executor_instances,
            cores=sizing.executor_cores,
            memory=sizing.executor_memory + sizing.memory_overhead + sizing.off_heap_memory,
            parallelism=max(s.parallelism for s in sizing.stages.values()),
            slots_per_executor=sizing.executor_cores // sizing.task_cpus,
        )
        phases: list[Phase] = []
        inside = set(members)
        for name in members:
            stage = sizing.stages[name]
            read = state.inputs[name]
            in_memory = sum(
                state.outputs[e.producer]
                for e in plan.stages[name].inputs
                if e.producer in inside and e.mode is ExchangeMode.PIPELINED
            )
            share = stage.per_task_memory
            files = read - in_memory
            file_inputs = self._file_inputs(state, name, inside)
            phases.extend(self._schema_phases(len(file_inputs), share))
            first = len(phases)
            if files > 0:
                scan = _scan_tasks(file_inputs, stage.max_partition_bytes)
                phases.append(Phase(scan, self.cost.task_seconds(files / scan, share)))
            # The provider runs AQE as an in-query correction: shuffle partitions coalesce towards the
            # planned bytes per task (parallelismFirst off), never above the decided parallelism.
            shuffled = read * SHUFFLE_FRACTION
            reduce = min(stage.parallelism, max(1, math.ceil(shuffled / self.config.avg_bytes_per_task)))
            phases.append(Phase(reduce, self.cost.task_seconds(shuffled / reduce, share), reads_shuffle=True))
            phases[first] = replace(phases[first], driver_s=self.cost.driver_stage_s)
        planned = _RegionPlan(request, tuple(phases), {n: sizing.stages[n].parallelism for n in members})
        self._region_plans[key] = _PLAN_CACHE[shared_key] = planned
        self.metrics.planner_calls += 1
        self.metrics.planner_s += time.perf_counter() - started
        return planned

    def _schema_phases(self, reads: int, share: float) -> list[Phase]:
        """Spark's schema job per parquet input read without a schema: one task reading a footer."""
        return [Phase(1, self.cost.task_seconds(FOOTER_BYTES, share))] * reads

    def _file_inputs(self, state: _Run, stage: str, region: set[str]) -> list[float]:
        """Bytes of each input a stage scans from files: its tables and its upstreams' outputs (not those
        handed over in memory inside ``region``)."""
        run = state.run
        sizes = [run.table_bytes[t] for t in run.shape.external.get(stage, ())]
        for e in run.shape.plan.stages[stage].inputs:
            if not (e.producer in region and e.mode is ExchangeMode.PIPELINED):
                sizes.append(state.outputs[e.producer])
        return sizes

    def _retry_waiting(self) -> None:
        """Regions the capacity check held back, first come first served, while they now fit."""
        while self.waiting_regions and self.cluster.free and self.cluster.waiting == 0:
            state, region = self.waiting_regions[0]
            if not self._launch_region(state, region, retry=True):
                return
            self.waiting_regions.popleft()

    # --- executors and tasks ---------------------------------------------------------------------------

    def _granted(self, owner: object, executors: int) -> None:
        app: _App = owner  # type: ignore[assignment]
        now = self.loop.now
        app.granted += executors
        self._granted_live += executors
        self.metrics.reserved_core_s -= now * executors * self.spec.executor_cores
        state = app.run
        if now < self.metrics.first_executor[state.index]:
            self.metrics.first_executor[state.index] = now
        if self.cpu is not None and self.loopback is not None:
            self.cpu.run(self.loopback.executor_cpu_s, float(executors), self._executor_ready, app, executors)
        else:
            self.loop.after(self.cost.executor_start_s, self._executor_ready, app, executors)

    def _release(self, app: _App, executors: int) -> None:
        app.granted -= executors
        self._granted_live -= executors
        self._added_live -= executors
        self.metrics.reserved_core_s += self.loop.now * executors * self.spec.executor_cores
        self.metrics.added_core_s += self.loop.now * executors * self.spec.executor_cores
        self.cluster.release(executors)
        if self.waiting_regions:
            self._retry_waiting()

    def _executor_ready(self, app: _App, executors: int) -> None:
        self.metrics.added_core_s -= self.loop.now * executors * self.spec.executor_cores
        self._added_live += executors
        if app.queued_at >= 0:
            self.metrics.app_queue_sum_s += self.loop.now - app.queued_at
            app.queued_at = -1.0
            self._drop_hold(app)
        if app.done:
            self._release(app, executors)
            return
        self._account(app)
        app.ready += executors
        app.cold += executors
        self._fill(app)
        self._maybe_idle(app)

    def _account(self, app: _App) -> None:
        """Ready executor cores without a task since the last change: waiting on the driver, or on nothing."""
        now = self.loop.now
        idle = (app.ready * self.spe - app.running) * (now - app.mark)
        if app.blocked:
            self.metrics.idle_driver_core_s += idle
        else:
            self.metrics.idle_slot_core_s += idle
        app.mark = now

    def _driver_work(self, app: _App) -> None:
        """The phase starting now waits for the driver's work on it, if any (executors stay held)."""
        seconds = app.phases[app.phase].driver_s + self.driver_job_s
        if seconds <= 0:
            return
        self._account(app)
        app.blocked = True
        if self.cpu is not None:
            self.cpu.run(seconds, 1.0, self._driver_done, app)
        else:
            self.loop.after(seconds, self._driver_done, app)

    def _driver_done(self, app: _App) -> None:
        self._account(app)
        app.blocked = False
        self._job_submitted(app)
        self._fill(app)
        self._maybe_idle(app)

    def _fill(self, app: _App) -> None:
        free = app.ready * self.spe - app.running
        if free <= 0 or app.pending <= 0 or app.blocked:
            return
        phase = app.phases[app.phase]
        count = min(free, app.pending)
        app.pending -= count
        self._account(app)
        app.running += count
        app.activity += 1
        self.metrics.tasks += count
        seconds = phase.task_s
        if app.cold:  # a fresh executor's first task loads classes and warms the JIT
            warm = min(app.cold, count)
            app.cold -= warm
            count -= warm
            self._run_tasks(app, warm, seconds + self.warmup_s)
        if count:
            self._run_tasks(app, count, seconds)

    def _run_tasks(self, app: _App, count: int, seconds: float) -> None:
        """Equal tasks started together end together: one event (or CPU job) for the batch."""
        if self.cpu is not None:
            self.cpu.run(seconds, float(count), self._task_done, app, count, self.loop.now)
        else:
            self.loop.after(seconds, self._task_done, app, count, self.loop.now)

    def _task_done(self, app: _App, count: int, launched: float) -> None:
        # Used as an event log counts it: each task's launch to finish (wall, not CPU, on a shared machine).
        self.metrics.used_core_s += (self.loop.now - launched) * count
        self._account(app)
        app.running -= count
        if app.pending == 0 and app.running == 0:
            app.phase += 1
            if app.phase == len(app.phases):
                self._finish(app)
                return
            phase = app.phases[app.phase]
            # Executors that ran the previous phase's (map) tasks keep their shuffle files while this
            # phase reads them; a phase that reads files leaves the finished shuffle behind.
            maps = app.phases[app.phase - 1].tasks
            app.shuffle_holders = min(app.ready, math.ceil(maps / self.spe)) if phase.reads_shuffle else 0
            app.pending = phase.tasks
            self._driver_work(app)
            self._job_submitted(app)
        self._fill(app)
        self._maybe_idle(app)

    def _finish(self, app: _App) -> None:
        app.done = True
        if app.record is not None:
            app.record[4] = round(self.loop.now, 1)
        self.cluster.cancel(app)
        self._drop_hold(app)
        self._account(app)
        if app.ready:
            ready, app.ready = app.ready, 0
            self._release(app, ready)
        self._unit_done(app.run, app.stages)

    # --- dynamic allocation ----------------------------------------------------------------------------

    def _job_submitted(self, app: _App) -> None:
        """Dynamic allocation sees a phase's tasks once its driver work is done (the job is submitted)."""
        if self.scales_executors and not app.blocked:
            self._backlog(app)

    def _ask(self, app: _App, executors: int) -> None:
        """Ask the cluster for executors; places the ledger kept for the application go first."""
        kept = min(executors, app.held)
        app.held -= kept
        if kept:
            self._granted(app, kept)
        self.cluster.request(app, executors - kept)

    def _drop_hold(self, app: _App) -> None:
        """The ledger forgets the application's reservation (its first executor is added, or it ended)."""
        if app.held:
            held, app.held = app.held, 0
            self.cluster.release(held)
            if self.waiting_regions:
                self._retry_waiting()

    def _needed(self, app: _App) -> int:
        needed = math.ceil((app.pending + app.running) / self.spe)
        cap = self._cap(app)
        return needed if cap is None else min(cap, needed)

    def _cap(self, app: _App) -> int | None:
        """The most executors the application may hold: dynamic's cap, the admitted or the requested count."""
        if self.grow and app.record is not None:
            return int(app.record[1])
        return app.want if self.release else self.policy.max_executors

    def _backlog(self, app: _App) -> None:
        """Pending tasks start the backlog timer; a lower need cancels requests not yet granted."""
        needed = self._needed(app)
        if app.target > needed:
            dropped = self.cluster.cancel(app)
            app.target = max(app.granted, app.target - dropped)
        if app.pending and app.target < needed and not app.ticking:
            app.ticking = True
            app.step = 1
            self.loop.after(self.policy.backlog_timeout_s, self._tick, app)

    def _tick(self, app: _App) -> None:
        app.ticking = False
        if app.done or not app.pending:
            return
        needed = self._needed(app)
        if app.target < needed:
            add = min(app.step, needed - app.target)
            app.target += add
            app.step *= 2
            self._ask(app, add)
            app.ticking = True
            self.loop.after(self.policy.backlog_timeout_s, self._tick, app)  # the sustained backlog timeout

    def _maybe_idle(self, app: _App) -> None:
        if not self.scales_executors or app.pending:
            return
        if self.policy.name == "dynamic" and app.phase != len(app.phases) - 1:
            return  # (one stage per application: its scan's executors all hold map output)
        if self._idle_executors(app):
            self.loop.after(self.policy.idle_timeout_s, self._idle_check, app, app.activity, False)
        timeout = self.policy.shuffle_timeout_s
        if self.release and timeout is not None and self._idle_executors(app, holders=True):
            self.loop.after(timeout, self._idle_check, app, app.activity, True)

    def _idle_executors(self, app: _App, holders: bool = False) -> int:
        """Ready executors with no task and (unless ``holders``) no shuffle data still read."""
        idle = (app.ready * self.spe - app.running) // self.spe
        return max(0, min(idle, app.ready if holders else app.ready - app.shuffle_holders))

    def _idle_check(self, app: _App, activity: int, holders: bool) -> None:
        if app.done or app.activity != activity:
            return
        idle = self._idle_executors(app, holders)
        if idle:
            if holders:
                app.shuffle_holders = max(0, app.shuffle_holders - idle)
            self._account(app)
            app.ready -= idle
            app.target = max(0, app.target - idle)
            self._release(app, idle)
            if app.pending:
                # Released while its driver worked on the next stage (Spark does that too): the pending
                # tasks ask again after the backlog timeout, or the application would wait for ever.
                self._backlog(app)


def _scan_tasks(inputs: Sequence[float], split: float) -> int:
    """Spark scans each input apart (a join's sides, a broadcast's small side): at least one task each."""
    return max(1, sum(max(1, math.ceil(b / split)) for b in inputs))


def region_inputs(
    run: DagRun, outputs: Mapping[str, float], ran_with: Mapping[str, int], members: Sequence[str]
) -> dict[str, StageBytes]:
    """What each stage of a region reads before it runs: an upstream outside the region as one part file per
    task it ran with (``ran_with``), a table as parquet files of at most FILE_BYTES."""
    plan = run.shape.plan
    inside = set(members)
    result = {}
    for name in members:
        upstream = {}
        ran = {}
        for e in plan.stages[name].inputs:
            if e.producer in inside:
                continue
            parts = ran_with[e.producer]
            upstream[e.input_name] = _split(outputs[e.producer], parts)
            ran[e.input_name] = parts
        external = {
            t: _split(run.table_bytes[t], math.ceil(run.table_bytes[t] / FILE_BYTES))
            for t in run.shape.external.get(name, ())
        }
        result[name] = StageBytes(upstream=upstream, external=external, upstream_parallelism=ran)
    return result


def _split(total: float, parts: int) -> list[int]:
    """``total`` bytes as ``parts`` near-equal integer sizes."""
    parts = max(1, parts)
    whole = int(total)
    base, extra = divmod(whole, parts)
    return [base + 1] * extra + [base] * (parts - extra)


def simulate(
    cluster: ClusterSpec,
    cost: CostModel,
    policy: PolicySpec,
    runs: Sequence[DagRun],
    loopback: LoopbackModel | None = None,
    streams: int | None = None,
    horizon_s: float | None = None,
) -> dict[str, Any]:
    """Run one policy (closed-loop with ``streams`` until ``horizon_s``); the summary of :class:`Metrics`."""
    return Simulation(cluster, cost, policy, runs, loopback, streams, horizon_s).run().summary()
