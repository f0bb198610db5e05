"""Decide a region: small pure steps from its inputs and settings to one :class:`RegionDecision`.

1. resolve the forward groups of the region's stages (before any stage is decided);
2. decide each stage in region order (``decider.decide_stage``: fixed, inherited, or from its bytes);
3. size the region's application (``planning.size_region``);
4. align each forward group's followers with their leader's sized count (a new sizing);
5. where each stage's settings reach Spark and its session settings;
6. the decided traces.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from airflow_provider_finegrained.contract import StageTrace
from airflow_provider_finegrained.execution.decision.align import align_followers
from airflow_provider_finegrained.execution.decision.decider import StageChoice, decide_stage
from airflow_provider_finegrained.execution.decision.groups import GroupPlan, resolve_groups
from airflow_provider_finegrained.execution.decision.inputs import StageInputs, consumption
from airflow_provider_finegrained.execution.decision.session import DecisionSettings, adaptive_conf, write_options
from airflow_provider_finegrained.execution.decision.value import RegionDecision, StageDecision
from airflow_provider_finegrained.execution.spark_reach import SparkReach, carried_session_conf, spark_reach
from airflow_provider_finegrained.planning import (
    ClusterProfile,
    DagPlan,
    ExchangeMode,
    LearnedExpansion,
    ParallelismConfig,
    RegionSizing,
    size_region,
)
from airflow_provider_finegrained.planning.adaptive_sizes import decide_adaptive
from airflow_provider_finegrained.planning.stage_sizing import StageSizing
from airflow_provider_finegrained.secrets import redact_mapping


def decide_region(
    plan: DagPlan,
    region: str,
    inputs: Mapping[str, StageInputs],
    config_for: Callable[[str], ParallelismConfig],
    profile: ClusterProfile,
    learned: Mapping[str, LearnedExpansion] | None = None,
    ran_with: Mapping[str, int] | None = None,
    written: Collection[str] = (),
    settings: DecisionSettings | None = None,
) -> RegionDecision:
    """Decide parallelism, Spark sizing and settings for every stage of ``region``, in region order.

    Stages of one forward group share one parallelism (FLIP-187): the first member to be decided decides
    for the group, within the intersection of every member's bounds (``config_for`` of each), and the
    others take its value, also after sizing moves it to even waves. A group already decided in a region
    that ran earlier passes its value on (``StageInputs.upstream_parallelism``, ``ran_with``: the
    parallelism in the traces of :func:`forward_group_peers`), so it is decided once.

    ``learned``: per stage, an expansion learned from its past runs (a deciding stage decides from its
    non-broadcast bytes times the work factor; its memory floor uses the memory factor). ``written``: the
    region's stages that have an ``output_path``. ``settings``: AQE, the stages' own ``spark_conf`` and the
    resource bounds (defaults: AQE on, no stage settings, no executor lifecycle).
    """
    settings = settings or DecisionSettings()
    configs = _Configs(config_for)
    members = plan.regions[region]
    groups = resolve_groups(plan, region, inputs, configs, ran_with or {})
    choices = decide_stages(plan, members, inputs, configs, groups, learned or {})
    sizing = align_followers(size_region([c.demand(plan.stages[c.stage]) for c in choices], profile), choices)
    inside, outside = consumers(plan, members)
    options = {  # the writer's row groups, cut for the splits of the stages that read the committed output
        m: write_options(settings.output_format.get(m, "parquet"), [configs(c) for c in outside[m]] or [configs(m)])
        for m in members
    }
    shape = _Shape(
        region, members[0], sizing, inside, outside, frozenset(written) & set(members), settings, options,
        {m: inputs.get(m, StageInputs()).to_record() for m in members},
        _region_record(profile, ran_with or {}, written, settings, configs.asked),
    )  # fmt: skip
    stages = stage_decisions(plan, shape, choices)
    return RegionDecision(region, members[0], sizing, stages, inside, outside, shape.written, profile, settings)


@dataclass(frozen=True)
class _Shape:
    """What every stage's decision reads of its region once the stages are sized."""

    region: str
    leader: str
    sizing: RegionSizing
    inside: Mapping[str, tuple[str, ...]]
    outside: Mapping[str, tuple[str, ...]]
    written: frozenset[str]
    settings: DecisionSettings
    write_options: Mapping[str, Mapping[str, str]]
    inputs: Mapping[str, Mapping[str, Any]]
    """Each stage's inputs as recorded (``StageInputs.to_record``)."""
    record: Mapping[str, Any]
    """The region's recorded settings (``_region_record``)."""


class _Configs:
    """``config_for``, asked once per stage; what it said is recorded with the decision."""

    def __init__(self, config_for: Callable[[str], ParallelismConfig]) -> None:
        self._config_for = config_for
        self.asked: dict[str, ParallelismConfig] = {}

    def __call__(self, stage: str) -> ParallelismConfig:
        if stage not in self.asked:
            self.asked[stage] = self._config_for(stage)
        return self.asked[stage]


def decide_stages(
    plan: DagPlan,
    members: Sequence[str],
    inputs: Mapping[str, StageInputs],
    config_for: Callable[[str], ParallelismConfig],
    groups: Mapping[int, GroupPlan],
    learned: Mapping[str, LearnedExpansion],
) -> tuple[StageChoice, ...]:
    """Each stage's choice in region order: an in-region consumer's input is estimated from what its producer
    consumed, and a forward group's followers take the choice of its leader (decided before them)."""
    in_region = frozenset(members)
    estimated: dict[str, int] = {}
    leaders: dict[int, StageChoice] = {}
    choices: list[StageChoice] = []
    for name in members:
        used = consumption(plan, name, inputs.get(name, StageInputs()), in_region, estimated)
        group = groups[plan.stages[name].forward_group]
        config = config_for(name)
        choice = decide_stage(plan, name, used, config, group, learned.get(name), leaders.get(group.group))
        if choice.leads:
            leaders[group.group] = choice
        estimated[name] = used.estimated_output
        choices.append(choice)
    return tuple(choices)


def consumers(plan: DagPlan, members: Sequence[str]) -> tuple[dict[str, tuple[str, ...]], dict[str, tuple[str, ...]]]:
    """Each stage's consumers in the region (handed over in memory, or committed and read) and outside it."""
    in_region = set(members)
    inside: dict[str, list[str]] = {m: [] for m in members}
    outside: dict[str, list[str]] = {m: [] for m in members}
    for exchange in plan.exchanges:
        if exchange.producer not in in_region:
            continue
        same_app = exchange.consumer in in_region
        if same_app:
            inside[exchange.producer].append(exchange.consumer)
            if exchange.mode is not ExchangeMode.PIPELINED:
                outside[exchange.producer].append(exchange.consumer)  # blocking inside a merged region: commit too
        else:
            outside[exchange.producer].append(exchange.consumer)
    return {k: tuple(v) for k, v in inside.items()}, {k: tuple(v) for k, v in outside.items()}


def stage_decisions(plan: DagPlan, shape: _Shape, choices: Sequence[StageChoice]) -> dict[str, StageDecision]:
    """Each stage's decision: where its settings reach Spark, its session settings, its trace."""
    members = [c.stage for c in choices]
    sized = shape.sizing.stages
    decided_conf = {m: sized[m].session_conf() for m in members}
    scans = {m: sized[m].balance is not None for m in members}
    effective, carried = carried_session_conf(members, shape.inside, shape.outside, decided_conf, scans, shape.written)
    bytes_per_task = {c.stage: c.config.avg_bytes_per_task for c in choices}
    reach = spark_reach(members, shape.inside, shape.outside, decided_conf, bytes_per_task, scans, shape.written)
    aqe = shape.settings.adaptive_query_execution
    result: dict[str, StageDecision] = {}
    for choice in choices:
        name = choice.stage
        scans_of = carried.get(name, name)
        session = {
            **effective[name],
            **adaptive_conf(aqe, choice.config, sized[scans_of].balance, sized[name].coalesce_floor),
            **shape.settings.sql_conf(name),
        }
        trace = decided_trace(plan, shape, choice, reach[name])
        result[name] = StageDecision(
            name, choice.parallelism, trace.rule, sized[name].parallelism, sized[name], session, scans_of,
            reach[name].runs_in, shape.write_options[name], plan.stages[name].resources, trace,
        )  # fmt: skip
    return result


def decided_trace(plan: DagPlan, shape: _Shape, choice: StageChoice, reach: SparkReach) -> StageTrace:
    """The stage's decided trace: inputs, config, decided and sized parallelism, the application's shape."""
    config, expansion, sizing = choice.config, choice.expansion, shape.sizing
    sized = sizing.stages[choice.stage]
    stage = plan.stages[choice.stage]
    return StageTrace(
        stage=choice.stage,
        region=shape.region,
        slot_sharing_group=stage.slot_sharing_group,
        region_leader=shape.leader,
        consumed_bytes=dict(choice.consumption.consumed_bytes),
        broadcast_inputs=sorted(choice.consumption.broadcast),
        config={
            "min_parallelism": config.min_parallelism,
            "max_parallelism": config.max_parallelism,
            "avg_bytes_per_task": config.avg_bytes_per_task,
            "max_broadcast_ratio": config.max_broadcast_ratio,
            "normalize": config.normalize,
            "default_source_parallelism": config.default_source_parallelism,
        },
        decided_parallelism=choice.parallelism,
        rule=choice.rule,
        computed_parallelism=choice.computed,
        memory_fraction=stage.memory_fraction,
        learned=(expansion.to_dict() if expansion and (choice.corrected or expansion.memory is not None) else None),
        parallelism=sized.parallelism,
        sizing_notes=[*sized.notes, *reach.notes],
        runs_in=reach.runs_in,
        waves=sized.waves,
        executors=sizing.executor_instances,
        executor_cores=sizing.executor_cores,
        executor_memory=sizing.executor_memory,
        memory_overhead=sizing.memory_overhead,
        spark_memory_fraction=sizing.memory_fraction,
        input_balance=_with_adaptive(sized, config.avg_bytes_per_task),
        decided_from=_stage_record(shape, choice),
    )


def _with_adaptive(sized: StageSizing, avg_bytes_per_task: int) -> dict[str, Any] | None:
    """The stage's input balance record with the AQE sizes decided from it (set only with AQE on)."""
    if sized.balance is None:
        return None
    adaptive = decide_adaptive(avg_bytes_per_task, sized.balance).to_dict()
    return {**sized.balance.to_dict(), "adaptive": {"applies": "only with adaptive_query_execution on", **adaptive}}


def _region_record(
    profile: ClusterProfile,
    ran_with: Mapping[str, int],
    written: Collection[str],
    settings: DecisionSettings,
    configs: Mapping[str, ParallelismConfig],
) -> dict[str, Any]:
    """What the region's decision read besides each stage's inputs (``explain`` decides again from it)."""
    bounds = settings.resource_bounds
    return {
        "profile": asdict(profile),
        "ran_with": dict(ran_with),
        "written": sorted(written),
        "adaptive_query_execution": settings.adaptive_query_execution,
        "resource_bounds": None if bounds is None else asdict(bounds),
        "executors_from": settings.executors_from,
        "jit": settings.jit,
        "configs": {stage: asdict(config) for stage, config in configs.items()},
    }


def _stage_record(shape: _Shape, choice: StageChoice) -> dict[str, Any]:
    """The trace's ``decided_from``: this stage's inputs and settings, and the region's (secrets masked)."""
    return {
        "inputs": dict(shape.inputs[choice.stage]),
        "learned": choice.expansion.to_dict() if choice.expansion else None,
        "sql_conf": redact_mapping(shape.settings.sql_conf(choice.stage)),
        "output_format": shape.settings.output_format.get(choice.stage, "parquet"),
        "region": dict(shape.record),
    }
