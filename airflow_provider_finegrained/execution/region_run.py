"""Decide a region's run: each stage's parallelism from the bytes it consumes, then the Spark sizing.

Pure: the operator gathers upstream outputs (XCom), external input sizes and the connection's
settings, and this module turns them into per-stage decisions and traces. Stages of one region run
in one application, so a pipelined consumer's input size is estimated from what its producer
consumed (its output is not materialized to measure).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from airflow_provider_finegrained.contract import OutputRecord, StageTrace
from airflow_provider_finegrained.planning import (
    ClusterProfile,
    ConsumedResult,
    DagPlan,
    Distribution,
    ExchangeMode,
    ParallelismConfig,
    RegionSizing,
    StageDemand,
    explain_parallelism,
    size_region,
)


@dataclass(frozen=True)
class ExternalSizes:
    """An external input (files outside the storage root) and the measured size of each file."""

    path: str
    format: str
    file_bytes: list[int]


@dataclass(frozen=True)
class StageInputs:
    """What one stage of the region reads, as known before the region runs."""

    upstream: Mapping[str, OutputRecord] = field(default_factory=dict)
    """Committed outputs of blocking upstreams outside the region, by input name."""
    external: Mapping[str, ExternalSizes] = field(default_factory=dict)
    external_broadcast: frozenset[str] = frozenset()
    upstream_parallelism: Mapping[str, int] = field(default_factory=dict)
    """Parallelism upstream stages ran with (from their traces), for forward edges across regions."""


@dataclass(frozen=True)
class RegionDecision:
    region: str
    leader: str
    sizing: RegionSizing
    traces: dict[str, StageTrace]
    in_region_consumers: dict[str, list[str]]
    outside_consumers: dict[str, list[str]]


def decide_region(
    plan: DagPlan,
    region: str,
    inputs: Mapping[str, StageInputs],
    config_for: Callable[[str], ParallelismConfig],
    profile: ClusterProfile,
) -> RegionDecision:
    """Decide parallelism and Spark sizing for every stage of ``region``, in region order."""
    members = plan.regions[region]
    in_region = set(members)
    estimated_output: dict[str, int] = {}
    decided: dict[str, int] = {}
    traces: dict[str, StageTrace] = {}
    demands: list[StageDemand] = []
    forward_in_region: dict[str, str] = {}
    for name in members:
        stage = plan.stages[name]
        stage_inputs = inputs.get(name, StageInputs())
        consumed, consumed_bytes, broadcast_names = _consumed(plan, name, stage_inputs, in_region, estimated_output)
        config = config_for(name)
        decision = explain_parallelism(consumed, config)
        parallelism, rule = decision.parallelism, decision.rule
        forward_from = _forward_source(plan, name, decided, stage_inputs)
        if stage.fixed_parallelism is not None:
            parallelism, rule = stage.fixed_parallelism, "fixed parallelism (stage or its forward group)"
        elif forward_from is not None:
            parallelism, rule = forward_from[1], f"forward edge: same as {forward_from[0]!r}"
            if forward_from[0] in in_region:
                forward_in_region[name] = forward_from[0]
        decided[name] = parallelism
        estimated_output[name] = sum(v for k, v in consumed_bytes.items() if k not in broadcast_names)
        demands.append(
            StageDemand(
                name,
                parallelism,
                consumed_bytes=estimated_output[name],
                min_parallelism=config.min_parallelism,
                max_parallelism=config.max_parallelism,
                memory_fraction=stage.memory_fraction,
                resources=stage.resources,
                fixed=stage.fixed_parallelism is not None or forward_from is not None,
            )
        )
        traces[name] = StageTrace(
            stage=name,
            region=region,
            slot_sharing_group=stage.slot_sharing_group,
            region_leader=members[0],
            consumed_bytes=consumed_bytes,
            broadcast_inputs=sorted(broadcast_names),
            config={
                "min_parallelism": config.min_parallelism,
                "max_parallelism": config.max_parallelism,
                "avg_bytes_per_task": config.avg_bytes_per_task,
                "max_broadcast_ratio": config.max_broadcast_ratio,
                "normalize": config.normalize,
                "default_source_parallelism": config.default_source_parallelism,
            },
            decided_parallelism=parallelism,
            rule=rule,
            computed_parallelism=decision.computed,
            memory_fraction=stage.memory_fraction,
        )
    sizing = size_region(demands, profile)
    for name, producer in forward_in_region.items():
        # Sizing may move the producer to even waves; a forward consumer keeps the producer's count.
        ran_with = sizing.stages[producer]
        sizing.stages[name] = replace(
            sizing.stages[name],
            parallelism=ran_with.parallelism,
            waves=ran_with.waves,
            tasks_per_executor=ran_with.tasks_per_executor,
        )
    for name, trace in traces.items():
        stage_sizing = sizing.stages[name]
        trace.parallelism = stage_sizing.parallelism
        trace.sizing_notes = list(stage_sizing.notes)
        trace.waves = stage_sizing.waves
        trace.executors = sizing.executor_instances
        trace.executor_cores = sizing.executor_cores
        trace.executor_memory = sizing.executor_memory
        trace.memory_overhead = sizing.memory_overhead
        trace.spark_memory_fraction = sizing.memory_fraction
    in_region_consumers, outside_consumers = _consumers(plan, members, in_region)
    return RegionDecision(region, members[0], sizing, traces, in_region_consumers, outside_consumers)


def _consumed(
    plan: DagPlan,
    name: str,
    stage_inputs: StageInputs,
    in_region: set[str],
    estimated_output: Mapping[str, int],
) -> tuple[list[ConsumedResult], dict[str, int], set[str]]:
    results: list[ConsumedResult] = []
    consumed_bytes: dict[str, int] = {}
    broadcast: set[str] = set()
    for exchange in plan.stages[name].inputs:
        is_broadcast = exchange.distribution is Distribution.BROADCAST
        if exchange.producer in in_region:
            sizes = [estimated_output.get(exchange.producer, 0)]
        else:
            record = stage_inputs.upstream.get(exchange.input_name)
            if record is None:
                raise ValueError(f"stage {name!r}: no committed output for input {exchange.input_name!r}")
            sizes = record.partition_bytes
        results.append(ConsumedResult(sizes, broadcast=is_broadcast))
        consumed_bytes[exchange.input_name] = sum(sizes)
        if is_broadcast:
            broadcast.add(exchange.input_name)
    for input_name, external in stage_inputs.external.items():
        is_broadcast = input_name in stage_inputs.external_broadcast
        results.append(ConsumedResult(external.file_bytes, broadcast=is_broadcast))
        consumed_bytes[input_name] = sum(external.file_bytes)
        if is_broadcast:
            broadcast.add(input_name)
    return results, consumed_bytes, broadcast


def _forward_source(
    plan: DagPlan, name: str, decided: Mapping[str, int], stage_inputs: StageInputs
) -> tuple[str, int] | None:
    for exchange in plan.stages[name].inputs:
        if exchange.distribution is not Distribution.FORWARD:
            continue
        if exchange.producer in decided:
            return exchange.producer, decided[exchange.producer]
        if exchange.input_name in stage_inputs.upstream_parallelism:
            return exchange.producer, stage_inputs.upstream_parallelism[exchange.input_name]
    return None


def _consumers(
    plan: DagPlan, members: Sequence[str], in_region: set[str]
) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    inside: dict[str, list[str]] = {m: [] for m in members}
    outside: dict[str, list[str]] = {m: [] for m in members}
    for exchange in plan.exchanges:
        if exchange.producer not in in_region:
            continue
        same_app = exchange.consumer in in_region
        if same_app and exchange.mode is ExchangeMode.PIPELINED:
            inside[exchange.producer].append(exchange.consumer)
        elif same_app:
            inside[exchange.producer].append(exchange.consumer)
            outside[exchange.producer].append(exchange.consumer)  # blocking inside a merged region: commit too
        else:
            outside[exchange.producer].append(exchange.consumer)
    return inside, outside
