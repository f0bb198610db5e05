"""How a stage becomes phases of equal tasks: Spark's defaults or the provider's decision, and what it reads.

Every application runs Spark's schema job before it reads a parquet input (one task per ``read``, what
``spark.read.parquet`` without a schema costs), then each stage's scan and shuffle phases.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from airflow_provider_finegrained.planning import ExchangeMode, RegionSizing
from bench.simulate.costs import SHUFFLE_FRACTION, CostModel
from bench.simulate.decision import StageBytes
from bench.simulate.policies import MiB, PolicySpec
from bench.simulate.state import Phase, RunState
from bench.simulate.workload import DagRun

FOOTER_BYTES = 64 * 2**10
"""What a schema job's one task reads: a parquet footer."""
FILE_BYTES = 128 * MiB
"""External tables are stored as parquet files of at most this size."""


def default_phases(policy: PolicySpec, cost: CostModel, share: float, state: RunState, stage: str) -> list[Phase]:
    """Spark's defaults: split size from default parallelism, 200 shuffle partitions coalesced by AQE (``share``:
    a task's execution memory); with the policy's ``adaptive`` off, its shuffle partitions as they are."""
    p = policy
    read = state.inputs[stage]
    split = min(128 * MiB, max(4 * MiB, read / p.default_parallelism))
    files = file_inputs(state, stage, set())
    scan = scan_tasks(files, split)
    shuffled = read * SHUFFLE_FRACTION
    target = min(p.advisory_partition_bytes, max(1 * MiB, shuffled / p.default_parallelism))
    reduce = min(p.shuffle_partitions, max(1, math.ceil(shuffled / target))) if p.adaptive else p.shuffle_partitions
    return [
        *schema_phases(cost, len(files), share),
        task_phase(cost, scan, read, share, driver_s=cost.driver_stage_s),
        task_phase(cost, reduce, shuffled, share, reads_shuffle=True),
    ]


def task_phase(cost: CostModel, tasks: int, read: float, share: float, **settings: Any) -> Phase:
    """``tasks`` equal tasks over ``read`` bytes with ``share`` bytes of execution memory each (spilling or not)."""
    per_task = read / tasks
    return Phase(tasks, cost.task_seconds(per_task, share), spills=cost.spills(per_task, share), **settings)


def region_phases(
    cost: CostModel, avg_bytes_per_task: int, state: RunState, sizing: RegionSizing, members: Sequence[str]
) -> list[Phase]:
    """The phases of a region's stages as the provider decided them (``sizing``), one stage after another."""
    plan = state.run.shape.plan
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
        scanned = file_inputs(state, name, inside)
        phases.extend(schema_phases(cost, len(scanned), share))
        first = len(phases)
        if files > 0:
            phases.append(task_phase(cost, scan_tasks(scanned, stage.max_partition_bytes), files, share))
        # The provider runs AQE as an in-query correction: shuffle partitions coalesce towards the
        # planned bytes per task (parallelismFirst off), never above the decided parallelism.
        shuffled = read * SHUFFLE_FRACTION
        reduce = min(stage.parallelism, max(1, math.ceil(shuffled / avg_bytes_per_task)))
        phases.append(task_phase(cost, reduce, shuffled, share, reads_shuffle=True))
        phases[first] = replace(phases[first], driver_s=cost.driver_stage_s)
    return phases


def schema_phases(cost: CostModel, reads: int, share: float) -> list[Phase]:
    """Spark's schema job per parquet input read without a schema: one task reading a footer."""
    return [task_phase(cost, 1, FOOTER_BYTES, share)] * reads


def file_inputs(state: RunState, stage: str, region: set[str]) -> list[float]:
    """Bytes of each input a stage scans from files: its tables and its upstreams' outputs (not those
    handed over in memory inside ``region``)."""
    run = state.run
    sizes = [run.table_bytes[t] for t in run.shape.external.get(stage, ())]
    for e in run.shape.plan.stages[stage].inputs:
        if not (e.producer in region and e.mode is ExchangeMode.PIPELINED):
            sizes.append(state.outputs[e.producer])
    return sizes


def scan_tasks(inputs: Sequence[float], split: float) -> int:
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
