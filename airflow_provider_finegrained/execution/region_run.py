"""Decide a region's run: each stage's parallelism from the bytes it consumes, then the Spark sizing.

Pure: the operator gathers upstream outputs (XCom), external input sizes and the connection's
settings, and this module turns them into per-stage decisions and traces. Stages of one region run
in one application, so a pipelined consumer's input size is estimated from what its producer
consumed (its output is not materialized to measure).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from airflow_provider_finegrained.contract import OutputRecord, StageTrace
from airflow_provider_finegrained.execution.spark_reach import spark_reach
from airflow_provider_finegrained.planning import (
    ClusterProfile,
    ConsumedResult,
    DagPlan,
    Distribution,
    ExchangeMode,
    GroupBounds,
    LearnedExpansion,
    ParallelismConfig,
    RegionSizing,
    StageDemand,
    explain_parallelism,
    intersect_bounds,
    size_region,
)
from airflow_provider_finegrained.planning.balance import decide_adaptive, decide_balance
from airflow_provider_finegrained.planning.sizing import StageSizing, split_bytes


@dataclass(frozen=True)
class ExternalSizes:
    """An external input (files outside the storage root) and the measured size of each file."""

    path: str
    format: str
    file_bytes: list[int]
    row_group_bytes: int | None = None
    """The largest row group's bytes on disk (parquet footers); None: not read."""


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
    written: frozenset[str] = frozenset()
    """Stages with an ``output_path``: written by a job of their own even when only in-region stages read them."""


def decide_region(
    plan: DagPlan,
    region: str,
    inputs: Mapping[str, StageInputs],
    config_for: Callable[[str], ParallelismConfig],
    profile: ClusterProfile,
    learned: Mapping[str, LearnedExpansion] | None = None,
    ran_with: Mapping[str, int] | None = None,
    written: Collection[str] = (),
) -> RegionDecision:
    """Decide parallelism and Spark sizing for every stage of ``region``, in region order.

    Stages of one forward group share one parallelism (FLIP-187): the first member to be decided
    decides for the group, within the intersection of every member's bounds (``config_for`` of each),
    and the others take its value, also after sizing moves it to even waves. A group already decided
    in a region that ran earlier passes its value on: through a forward edge from a stage outside this
    region (``StageInputs.upstream_parallelism``) or through any other member of the group that ran
    (``ran_with``: the parallelism in the traces of :func:`forward_group_peers`), so a group whose
    members sit in several regions is decided once, by whichever of them runs first.

    ``learned`` holds, per stage, an expansion learned from its past runs: a deciding stage decides
    from its non-broadcast bytes times the learned work factor, and its memory floor uses the learned
    memory factor. ``written``: the region's stages that have an ``output_path`` (where each decision
    reaches Spark depends on it: such a stage is written and cached, not handed over lazily).
    """
    members = plan.regions[region]
    in_region = set(members)
    estimated_output: dict[str, int] = {}
    traces: dict[str, StageTrace] = {}
    demands: list[StageDemand] = []
    group_bounds: dict[int, GroupBounds | None] = {}
    group_choice = _decided_elsewhere(plan, members, inputs, ran_with or {})
    followers: dict[str, str] = {}
    """In-region stage -> the in-region stage that decided its forward group (whose sizing it copies)."""
    for name in members:
        stage = plan.stages[name]
        stage_inputs = inputs.get(name, StageInputs())
        consumed, consumed_bytes, broadcast_names, file_bytes = _consumed(
            plan, name, stage_inputs, in_region, estimated_output
        )
        config = config_for(name)
        group = stage.forward_group
        if group not in group_bounds:
            group_bounds[group] = _group_bounds(plan.forward_groups[group], config_for)
        bounds = group_bounds[group]
        decides = stage.fixed_parallelism is None and group not in group_choice
        # Only the stage that decides for its group decides within the group's bounds; the explanation
        # of the others (computed from their own bytes and bounds) stays in their traces.
        expansion = (learned or {}).get(name)
        corrected = decides and expansion is not None and bool(consumed)
        deciding_config = _within(config, bounds, plan.forward_groups[group]) if decides else config
        decision = explain_parallelism(
            _as_work(consumed, expansion) if corrected and expansion else consumed, deciding_config
        )
        parallelism, rule = decision.parallelism, decision.rule
        # The file scans follow the bytes on disk whatever the stage shuffles: the uncorrected decision.
        scan_parallelism: int | None = None
        if corrected and expansion:
            rule = expansion.rule if rule == "bytes / avg_bytes_per_task" else f"{rule} ({expansion.rule})"
            scan_parallelism = explain_parallelism(consumed, deciding_config).parallelism
        if decision.notes:  # the normalization that gave the number is part of its rule
            rule = f"{rule}; {'; '.join(decision.notes)}"
        low, high = (config.min_parallelism, config.max_parallelism) if bounds is None else (bounds.low, bounds.high)
        leads = False
        if stage.fixed_parallelism is not None:
            parallelism, rule = stage.fixed_parallelism, "fixed parallelism (stage or its forward group)"
        elif group in group_choice:
            source, parallelism = group_choice[group]
            rule = _inherited_rule(plan, name, source)
            if source in in_region:
                followers[name] = source
            elif bounds is not None and bounds.clamp(parallelism) != parallelism:
                # The earlier region ran under other settings; a stage still never exceeds its bounds.
                rule += f"; {parallelism} clamped to the forward group's bounds [{bounds.low}, {bounds.high}]"
                parallelism = bounds.clamp(parallelism)
                group_choice[group] = (source, parallelism)
        else:
            leads = True
            if bounds is not None:
                clamped = bounds.clamp(parallelism)
                if clamped != parallelism:  # a source's default is taken as given unless its group bounds it
                    rule = f"{rule}; clamped to the forward group's bounds [{bounds.low}, {bounds.high}]"
                    parallelism = clamped
                rule += _bound_setters(bounds, config)
                if scan_parallelism is not None:
                    scan_parallelism = bounds.clamp(scan_parallelism)
            group_choice[group] = (name, parallelism)
        estimated_output[name] = sum(v for k, v in consumed_bytes.items() if k not in broadcast_names)
        demands.append(
            StageDemand(
                name,
                parallelism,
                consumed_bytes=estimated_output[name],
                min_parallelism=low,
                max_parallelism=high,
                memory_fraction=stage.memory_fraction,
                resources=stage.resources,
                fixed=not leads,
                memory_expansion=expansion.memory if expansion else None,
                input_file_bytes=file_bytes,
                input_row_group_bytes=_scanned_row_group_bytes(plan, name, stage_inputs, in_region),
                scan_parallelism=scan_parallelism if leads else None,
                # A source's default is taken as given, not normalized; a decision from bytes is a power of two.
                power_of_two=leads and bool(consumed) and deciding_config.normalize == "power_of_two",
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
            learned=expansion.to_dict() if expansion and (corrected or expansion.memory is not None) else None,
        )
    sizing = size_region(demands, profile)
    for name, decider in followers.items():
        # Sizing may move the deciding stage to even waves or raise it to its memory floor (within
        # the group's bounds); the rest of its forward group runs with the same count.
        # Its file scans follow the group's uncorrected count, as the decider's do (the same count
        # when no learned factor corrected the decider's shuffle side).
        leader_sized = sizing.stages[decider]
        own = sizing.stages[name]
        moved = leader_sized.parallelism != own.parallelism
        balance = own.balance
        if leader_sized.scan_tasks != own.scan_tasks:
            demand = next(d for d in demands if d.stage == name)
            balance = decide_balance(
                demand.input_file_bytes,
                leader_sized.scan_tasks,
                row_group_bytes=demand.input_row_group_bytes,
                cores=sizing.slots * sizing.task_cpus,
                slots=sizing.slots,
            )
        sizing.stages[name] = replace(
            own,
            parallelism=leader_sized.parallelism,
            waves=leader_sized.waves,
            tasks_per_executor=leader_sized.tasks_per_executor,
            max_partition_bytes=(
                balance.max_partition_bytes if balance else split_bytes(estimated_output[name], leader_sized.scan_tasks)
            ),
            scan_parallelism=leader_sized.scan_tasks,
            balance=balance,
            notes=(*own.notes, _follow_note(decider, leader_sized)) if moved else own.notes,
        )
    in_region_consumers, outside_consumers = _consumers(plan, members, in_region)
    # Where each decision reaches Spark: a stage that only hands its output over in memory runs inside
    # its consumer's Spark jobs, under that stage's session settings (execution.spark_reach).
    reach = spark_reach(
        members,
        in_region_consumers,
        outside_consumers,
        {name: sizing.stages[name].session_conf() for name in members},
        {name: trace.config["avg_bytes_per_task"] for name, trace in traces.items()},
        {name: sizing.stages[name].balance is not None for name in members},
        written,
    )
    traces = {
        name: replace(
            trace,
            parallelism=sizing.stages[name].parallelism,
            sizing_notes=[*sizing.stages[name].notes, *reach[name].notes],
            runs_in=reach[name].runs_in,
            waves=sizing.stages[name].waves,
            executors=sizing.executor_instances,
            executor_cores=sizing.executor_cores,
            executor_memory=sizing.executor_memory,
            memory_overhead=sizing.memory_overhead,
            spark_memory_fraction=sizing.memory_fraction,
            input_balance=_with_adaptive(sizing.stages[name], trace.config["avg_bytes_per_task"]),
        )
        for name, trace in traces.items()
    }
    return RegionDecision(
        region, members[0], sizing, traces, in_region_consumers, outside_consumers, frozenset(written) & set(members)
    )


def _with_adaptive(sized: StageSizing, avg_bytes_per_task: int) -> dict[str, Any] | None:
    """The stage's input balance record with the AQE sizes decided from it (set only with AQE on)."""
    if sized.balance is None:
        return None
    adaptive = decide_adaptive(avg_bytes_per_task, sized.balance).to_dict()
    return {**sized.balance.to_dict(), "adaptive": {"applies": "only with adaptive_query_execution on", **adaptive}}


def _group_bounds(group: Sequence[str], config_for: Callable[[str], ParallelismConfig]) -> GroupBounds | None:
    """The forward group's bounds at run time (each member's settings), or None for a group of one."""
    if len(group) < 2:
        return None
    configs = {member: config_for(member) for member in group}
    return intersect_bounds({m: (c.min_parallelism, c.max_parallelism) for m, c in configs.items()})


def _within(config: ParallelismConfig, bounds: GroupBounds | None, group: Sequence[str]) -> ParallelismConfig:
    """``config`` with its bounds narrowed to its forward group's."""
    if bounds is None or (config.min_parallelism, config.max_parallelism) == (bounds.low, bounds.high):
        return config
    try:
        return replace(config, min_parallelism=bounds.low, max_parallelism=bounds.high)
    except ValueError as exc:
        raise ValueError(f"forward group {list(group)} (bounds [{bounds.low}, {bounds.high}]): {exc}") from None


def _bound_setters(bounds: GroupBounds, config: ParallelismConfig) -> str:
    """Say which members' bounds narrowed a deciding stage's own, for the trace's rule."""
    parts = []
    if bounds.low != config.min_parallelism:
        parts.append(f"min {bounds.low} from {bounds.low_stage!r}")
    if bounds.high != config.max_parallelism:
        parts.append(f"max {bounds.high} from {bounds.high_stage!r}")
    return f" (forward group bounds: {', '.join(parts)})" if parts else ""


def forward_group_peers(plan: DagPlan, region: str) -> tuple[str, ...]:
    """Stages outside ``region`` that share a forward group with one of its stages, in stage order.

    A region that runs after one of them takes the group's parallelism from its recorded trace
    (``decide_region``'s ``ran_with``) instead of deciding the group a second time.
    """
    members = plan.regions[region]
    in_region = set(members)
    groups = sorted({plan.stages[name].forward_group for name in members})
    return tuple(peer for g in groups for peer in plan.forward_groups[g] if peer not in in_region)


def _decided_elsewhere(
    plan: DagPlan, members: Sequence[str], inputs: Mapping[str, StageInputs], ran_with: Mapping[str, int]
) -> dict[int, tuple[str, int]]:
    """Forward groups already decided outside the region: the member that ran and its parallelism.

    Any member outside the region that ran counts, not only a forward producer: members of one group
    may sit in regions with no edge between them. When several ran (all with the group's value, unless
    they ran under another rule before), the first in the group's order gives the value.
    """
    in_region = set(members)
    known: dict[str, int] = {peer: value for peer, value in ran_with.items() if peer not in in_region}
    for name in members:
        by_input = inputs.get(name, StageInputs()).upstream_parallelism
        for exchange in plan.stages[name].inputs:
            if exchange.distribution is not Distribution.FORWARD or exchange.producer in in_region:
                continue
            if exchange.input_name in by_input:
                known.setdefault(exchange.producer, by_input[exchange.input_name])
    decided: dict[int, tuple[str, int]] = {}
    for group in sorted({plan.stages[name].forward_group for name in members}):
        first = next((peer for peer in plan.forward_groups[group] if peer in known), None)
        if first is not None:
            decided[group] = (first, known[first])
    return decided


def _follow_note(decider: str, ran_with: StageSizing) -> str:
    why = "; ".join(ran_with.notes)
    return f"forward group: {ran_with.parallelism} like {decider!r}" + (f" ({why})" if why else "")


def _inherited_rule(plan: DagPlan, name: str, source: str) -> str:
    direct = any(e.producer == source and e.distribution is Distribution.FORWARD for e in plan.stages[name].inputs)
    return f"forward edge: same as {source!r}" if direct else f"forward group: same as {source!r}"


def _scanned_row_group_bytes(plan: DagPlan, name: str, stage_inputs: StageInputs, in_region: set[str]) -> int | None:
    """The largest row group among the files a stage scans when every one of them is an external input
    whose footers were read; None (the provider's producers' size assumed) otherwise."""
    for exchange in plan.stages[name].inputs:
        if exchange.producer not in in_region and exchange.distribution is not Distribution.BROADCAST:
            return None  # a committed upstream output: its producer chose the row groups
    measured = [
        external.row_group_bytes
        for input_name, external in stage_inputs.external.items()
        if input_name not in stage_inputs.external_broadcast
    ]
    if not measured or any(m is None for m in measured):
        return None
    return max(m for m in measured if m is not None)


def _consumed(
    plan: DagPlan,
    name: str,
    stage_inputs: StageInputs,
    in_region: set[str],
    estimated_output: Mapping[str, int],
) -> tuple[list[ConsumedResult], dict[str, int], set[str], tuple[int, ...]]:
    """What a stage consumes: results for the decision, bytes per input, broadcast inputs, and the
    sizes of the files it scans (non-broadcast inputs from outside the region)."""
    results: list[ConsumedResult] = []
    consumed_bytes: dict[str, int] = {}
    broadcast: set[str] = set()
    file_bytes: list[int] = []
    for exchange in plan.stages[name].inputs:
        is_broadcast = exchange.distribution is Distribution.BROADCAST
        if exchange.producer in in_region:
            sizes = [estimated_output.get(exchange.producer, 0)]
        else:
            record = stage_inputs.upstream.get(exchange.input_name)
            if record is None:
                raise ValueError(f"stage {name!r}: no committed output for input {exchange.input_name!r}")
            sizes = record.partition_bytes
            if not is_broadcast:
                file_bytes.extend(sizes)
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
        else:
            file_bytes.extend(external.file_bytes)
    return results, consumed_bytes, broadcast, tuple(file_bytes)


def _as_work(consumed: Sequence[ConsumedResult], expansion: LearnedExpansion) -> list[ConsumedResult]:
    """Non-broadcast inputs scaled to work bytes; broadcast bytes stay (they bound each task's volume)."""
    return [r if r.broadcast else ConsumedResult([expansion.scale(b) for b in r.partition_bytes]) for r in consumed]


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
