"""What a simulation keeps: each DAG run in progress, its applications and their phases of equal tasks, and the
simulation's own state (its cluster, cost model, policy and runs, the event loop, the metrics, and what the
policy's variants decide by). The layers above it (:mod:`~bench.simulate.applications`,
:mod:`~bench.simulate.regions`, :mod:`~bench.simulate.sim`) add the behaviour, one concern each."""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_finegrained.planning import ClusterProfile, ExecutorRequest, ParallelismConfig
from bench.simulate.cluster import Cluster, ClusterSpec
from bench.simulate.costs import CostModel
from bench.simulate.events import EventLoop
from bench.simulate.loopback import LoopbackModel, SharedCPU
from bench.simulate.metrics import Metrics
from bench.simulate.policies import RELEASING, PolicySpec
from bench.simulate.workload import DagRun


@dataclass(frozen=True)
class Phase:
    """Equal tasks of one stage: a scan (file splits) or a shuffle's reduce; each takes ``task_s`` on one core."""

    tasks: int
    task_s: float
    reads_shuffle: bool = False
    """A reduce phase: it reads the previous phase's shuffle output (held by the executors that wrote it)."""
    driver_s: float = 0.0
    """The driver's own work before this phase's tasks (a stage's planning, its output's commit and
    measurement): the application's executors wait meanwhile."""
    spills: bool = False
    """Each task's data in memory exceeds its share of execution memory (:meth:`CostModel.spills`)."""


@dataclass(frozen=True)
class RegionPlan:
    """The provider's decision for a region: its executor request, its phases, and each stage's parallelism."""

    request: ExecutorRequest
    phases: tuple[Phase, ...]
    ran_with: dict[str, int]


class RunState:
    """One DAG run in progress: its stages' bytes, the parallelism its stages ran with, its units left."""

    __slots__ = ("done_stages", "first_grant", "index", "inputs", "outputs", "ran_with", "run", "units_left")

    def __init__(self, run: DagRun, index: int, units: int) -> None:
        self.run = run
        self.index = index
        self.inputs, self.outputs = run.stage_bytes()
        self.ran_with: dict[str, int] = {}
        self.units_left = units
        self.done_stages: set[str] = set()
        self.first_grant = math.inf


class App:
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

    def __init__(self, run: RunState, stages: tuple[str, ...], phases: list[Phase], want: int) -> None:
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


class SimulationState:
    """One policy over one workload on one cluster: the state every layer of :class:`~bench.simulate.sim.Simulation`
    reads and changes."""

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
        _check(runs, streams, horizon_s)
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
        self._policy_variant(policy.name)
        self._loopback_costs(cost, loopback)
        self.cluster = Cluster(cluster, self._granted)
        self.metrics = Metrics(policy.name, cluster.total_cores, cluster.executor_cores)
        self.spe = cluster.executor_cores  # one core per task
        self.waiting_regions: deque[tuple[RunState, str]] = deque()
        self._planning_inputs(cluster, cost, policy)
        self._unit_deps: dict[tuple[str, str], dict[str, tuple[str, ...]]] = {}
        self._stage_units: dict[str, dict[str, tuple[str, ...]]] = {}
        # (shape, its tables' bytes, region, forward-group peers that ran) -> the region's plan
        self._region_plans: dict[tuple[Any, ...], RegionPlan] = {}

    def _policy_variant(self, name: str) -> None:
        """What the policy ``name`` does: one application per region or per stage, how executors come and go."""
        self.provider = name.startswith("provider")
        self.release = name in RELEASING
        self.at_first_job = name in ("provider", "provider+grow", "provider+queue")
        self.grow = name == "provider+grow"
        self.queue = name == "provider+queue"
        self.scales_executors = name == "dynamic" or self.release

    def _loopback_costs(self, cost: CostModel, loopback: LoopbackModel | None) -> None:
        """The shared physical cores (with a loopback model) and the costs that depend on it."""
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

    def _planning_inputs(self, cluster: ClusterSpec, cost: CostModel, policy: PolicySpec) -> None:
        """The cluster profile and parallelism config the planning core decides the provider's regions with."""
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

    # --- defined by the layers above ----------------------------------------------------------------------

    def _granted(self, owner: object, executors: int) -> None:
        """The cluster granted ``executors`` to the application ``owner`` (:mod:`~bench.simulate.applications`)."""
        raise NotImplementedError

    def _retry_waiting(self) -> None:
        """Launch the regions the capacity check held back, while they fit (:mod:`~bench.simulate.regions`)."""
        raise NotImplementedError

    def _unit_done(self, state: RunState, stages: tuple[str, ...]) -> None:
        """A unit of ``state``'s run (an application's ``stages``) finished (:mod:`~bench.simulate.sim`)."""
        raise NotImplementedError


def _check(runs: Sequence[DagRun], streams: int | None, horizon_s: float | None) -> None:
    """At least one run; for a closed loop, both ``streams`` >= 1 and ``horizon_s`` > 0."""
    if not runs:
        raise ValueError("a simulation needs at least one DAG run")
    if (streams is None) != (horizon_s is None) or (streams is not None and (streams < 1 or (horizon_s or 0) <= 0)):
        raise ValueError(
            f"closed-loop runs need both streams >= 1 and horizon_s > 0, got streams={streams!r}, "
            f"horizon_s={horizon_s!r}"
        )
