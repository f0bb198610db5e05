"""Run a workload on a simulated cluster under one policy and measure what it reserved and used.

The policies are :mod:`bench.simulate.policies`'s (docs/simulation.md). A :class:`Simulation` is built in
layers, one concern each: :mod:`~bench.simulate.state` (what it keeps), :mod:`~bench.simulate.applications`
(an application's start, executors, tasks and dynamic allocation), :mod:`~bench.simulate.regions` (the
provider's regions: the planning core's decision and the capacity gate) and this module (the DAG runs:
arrivals, units, launching); :mod:`~bench.simulate.phases` turns a stage into phases of tasks and
:mod:`~bench.simulate.metrics` reports the figures.

``streams`` (with ``horizon_s``) runs the workload closed-loop instead of at its arrival times, as TPC's
throughput tests do: that many streams each start their next run when their last one ends, and the
runs finished by the horizon are counted.

With a :class:`~bench.simulate.loopback.LoopbackModel`, every start, executor start and task is CPU work
on a few shared physical cores (item 2's loopback cluster) and each DAG task pays Airflow's delay and
task-process start; without one, each takes its cost model's seconds on its own core.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from typing import Any

from bench.simulate.cluster import ClusterSpec
from bench.simulate.costs import CostModel
from bench.simulate.loopback import LoopbackModel
from bench.simulate.metrics import Metrics
from bench.simulate.phases import default_phases
from bench.simulate.policies import PolicySpec
from bench.simulate.regions import ProviderRegions
from bench.simulate.state import App, RunState
from bench.simulate.workload import DagRun


class Simulation(ProviderRegions):
    """One policy over one workload on one cluster; ``run()`` returns the metrics."""

    # --- the run ---------------------------------------------------------------------------------

    def run(self) -> Metrics:
        """Every DAG run, at its arrival or (closed loop) in streams until the horizon: what was measured."""
        started = time.perf_counter()
        m = self.metrics
        m.arrivals = [r.arrival for r in self.runs]
        m.first_executor = [math.inf] * len(self.runs)
        m.finishes = [math.nan] * len(self.runs)
        if self.streams is not None and self.horizon_s is not None:
            self._run_closed_loop(self.streams, self.horizon_s)
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
        self._record_slowest()
        return m

    def _run_closed_loop(self, streams: int, horizon_s: float) -> None:
        """``streams`` runs at once, each starting the next when it ends, until ``horizon_s``."""
        m = self.metrics
        m.arrivals = [math.nan] * len(self.runs)
        m.horizon_s = horizon_s
        for _ in range(min(streams, len(self.runs))):
            self._start_next()
        self.loop.run(until=horizon_s)
        # Executors still held at the horizon count up to it.
        self.loop.now = horizon_s
        cores = self.spec.executor_cores * horizon_s
        m.reserved_core_s += self._granted_live * cores
        m.added_core_s += self._added_live * cores
        if self._ran_dry is not None:
            raise RuntimeError(
                f"closed loop: a stream had no run left to start at {self._ran_dry:.0f} s, before the horizon "
                f"({len(self.runs)} runs); give more runs"
            )

    def _record_slowest(self) -> None:
        """The five runs that ended last, and (provider) how each region was admitted: what sets a makespan."""
        m = self.metrics
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
        state = RunState(run, index, len(units))
        for unit, deps in self._deps(run).items():
            if not deps:
                self._launch(state, unit, units[unit])

    def _unit_done(self, state: RunState, stages: tuple[str, ...]) -> None:
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

    def _launch(self, state: RunState, unit: str, stages: tuple[str, ...]) -> None:
        if self.loopback is not None:
            # Airflow: the scheduler queues the unit's task(s), each a fresh task process.
            self._airflow_start(len(stages), self._launch_now, state, unit, stages)
        else:
            self._launch_now(state, unit, stages)

    def _launch_now(self, state: RunState, unit: str, stages: tuple[str, ...]) -> None:
        if self.provider:
            self._launch_region(state, unit)
            return
        phases = default_phases(self.policy, self.cost, self.spec.task_memory(), state, stages[0])
        self._start_app(App(state, stages, phases, self.policy.fixed_executors))


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
