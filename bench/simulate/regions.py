"""The provider's regions in the simulation: the planning core decides each region (:mod:`bench.simulate.decision`),
the capacity gate admits it against the free executors (``decide_capacity``, or ``queue_capacity`` for
``provider+queue``), and a region that does not fit waits (the deferred task's capacity trigger)."""

from __future__ import annotations

import time

from airflow_provider_finegrained.planning import (
    CapacityDecision,
    CapacityOutcome,
    ExecutorRequest,
    RegionSizing,
    WorkerCapacity,
    decide_capacity,
    queue_capacity,
)
from bench.simulate.applications import Applications
from bench.simulate.decision import decide_region_sizing, forward_group_peers
from bench.simulate.phases import region_inputs, region_phases
from bench.simulate.state import App, RegionPlan, RunState

PLAN_CACHE: dict[object, RegionPlan] = {}
"""Region decisions by (cluster, cost model, parallelism config, shape, tables, region), across simulations."""


class ProviderRegions(Applications):
    """The provider's policies: one application per region, decided by the planning core and admitted by the
    capacity gate."""

    def _launch_region(self, state: RunState, region: str, retry: bool = False) -> bool:
        """Start the region's application if the capacity gate admits it, else let it wait: whether it started."""
        run = state.run
        planned = self._region_plan(state, region)
        state.ran_with.update(planned.ran_with)
        capacity = self._capacity(planned.request)
        if capacity.outcome is CapacityOutcome.IMPOSSIBLE:
            raise RuntimeError(f"run {run.run_id} {region}: {capacity.message}")
        too_small = capacity.executors < self.policy.min_admit_share * planned.request.executors
        if not capacity.can_run or too_small:
            self._wait(state, region, retry)
            return False
        self.metrics.capacity_outcomes[capacity.outcome.value] += 1
        # The provider's reservation ledger holds the granted places until the application registers (its
        # first executor, for the variants asking at the first job), so regions admitted meanwhile do not
        # count the same free executors twice.
        if not self.queue:
            self.cluster.hold(capacity.executors)
        app = App(state, run.shape.plan.regions[region], list(planned.phases), capacity.executors)
        app.record = [region, planned.request.executors, capacity.executors, round(self.loop.now, 1), None]
        self.metrics.admissions.setdefault(state.index, []).append(app.record)
        if retry and self.loopback is not None:
            self._airflow_start(1, self._start_app, app)  # the trigger fired: the task resumes in a new process
        else:
            self._start_app(app)
        return True

    def _capacity(self, request: ExecutorRequest) -> CapacityDecision:
        """The capacity gate's decision on ``request`` against the cluster's free executor places."""
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
        capacity = (queue_capacity if self.queue else decide_capacity)(request, workers)
        self.metrics.capacity_decisions += 1
        return capacity

    def _wait(self, state: RunState, region: str, retry: bool) -> None:
        """A region the gate held back waits: in line for freed executors, or (loopback) for its trigger's poll."""
        if not retry:
            self.metrics.capacity_outcomes["wait"] += 1
            if self.loopback is None:
                self.waiting_regions.append((state, region))
        if self.loopback is not None:
            # The deferred task's capacity trigger looks again each poll, no sooner than its floor.
            first = max(self.loopback.trigger_floor_s, self.loopback.trigger_poll_s) if not retry else 0.0
            self.loop.after(first or self.loopback.trigger_poll_s, self._poll_capacity, state, region)

    def _poll_capacity(self, state: RunState, region: str) -> None:
        if self.cluster.free and self.cluster.waiting == 0:
            self._launch_region(state, region, retry=True)  # schedules the next poll itself if it cannot run
        else:
            self.loop.after(self.loopback.trigger_poll_s if self.loopback else 1.0, self._poll_capacity, state, region)

    def _region_plan(self, state: RunState, region: str) -> RegionPlan:
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
        planned = PLAN_CACHE.get(shared_key)
        if planned is None:
            planned = PLAN_CACHE[shared_key] = self._decide_region(state, region, peers)
        self._region_plans[key] = planned
        return planned

    def _decide_region(self, state: RunState, region: str, peers: dict[str, int]) -> RegionPlan:
        """The planning core's decision for the region (``peers``: its forward-group peers' parallelism)."""
        plan = state.run.shape.plan
        members = plan.regions[region]
        started = time.perf_counter()
        inputs = region_inputs(state.run, state.outputs, state.ran_with, members)
        sizing = decide_region_sizing(plan, region, inputs, self.config, self.profile, ran_with=peers)
        phases = region_phases(self.cost, self.config.avg_bytes_per_task, state, sizing, members)
        planned = RegionPlan(
            executor_request(sizing), tuple(phases), {n: sizing.stages[n].parallelism for n in members}
        )
        self.metrics.planner_calls += 1
        self.metrics.planner_s += time.perf_counter() - started
        return planned

    def _retry_waiting(self) -> None:
        """Regions the capacity check held back, first come first served, while they now fit."""
        while self.waiting_regions and self.cluster.free and self.cluster.waiting == 0:
            state, region = self.waiting_regions[0]
            if not self._launch_region(state, region, retry=True):
                return
            self.waiting_regions.popleft()


def executor_request(sizing: RegionSizing) -> ExecutorRequest:
    """What a region's application asks the capacity gate for: its executors as the planning core sized them."""
    return ExecutorRequest(
        executors=sizing.executor_instances,
        cores=sizing.executor_cores,
        memory=sizing.executor_memory + sizing.memory_overhead + sizing.off_heap_memory,
        parallelism=max(s.parallelism for s in sizing.stages.values()),
        slots_per_executor=sizing.executor_cores // sizing.task_cpus,
    )
