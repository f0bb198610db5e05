"""The provider's decision for one region, modelled from the planning core's public functions.

The provider decides a region in ``execution.decision.decide_region``; the simulator uses only the names
``airflow_provider_finegrained.planning`` exports, so it takes what it reads of that decision (each stage's
parallelism, scan split and memory share, and the application's executors) from the same planning
functions, in the same steps:

1. forward groups: a group already decided outside the region (a member that ran in an earlier region, or a
   forward producer outside it) passes its value on; otherwise the region's first member decides it and the
   others follow;
2. each stage in region order: ``explain_parallelism`` over what it consumes (committed upstream outputs and
   external files; an in-region producer's output estimated as what that producer consumed, broadcast
   inputs left out), unless its parallelism is fixed, inherited or its group leader's;
3. ``size_region`` over the stages' ``StageDemand``;
4. each follower takes its leader's sized count, waves and scan tasks, its scan split from ``decide_balance``
   (``split_bytes`` when it scans no file).

What the simulator's workloads allow it to leave out: every stage has the same ``ParallelismConfig`` (so a
forward group's bounds are that config's), nothing is learned from history, no row-group size is read from
footers, no external input is broadcast, and no trace or Spark setting is built. ``tests/bench/test_simulate.py``
checks that this sizing equals the provider's ``decide_region``'s on every region of the simulated DAG shapes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from airflow_provider_finegrained.planning import (
    ClusterProfile,
    ConsumedResult,
    DagPlan,
    Distribution,
    ParallelismConfig,
    RegionSizing,
    StageDemand,
    decide_balance,
    explain_parallelism,
    size_region,
    split_bytes,
)


@dataclass(frozen=True)
class StageBytes:
    """What one stage of a region reads, as known before the region runs."""

    upstream: Mapping[str, Sequence[int]] = field(default_factory=dict)
    """Input name -> the part files' bytes of a committed output from a producer outside the region."""
    external: Mapping[str, Sequence[int]] = field(default_factory=dict)
    """External input (table) -> its files' bytes."""
    upstream_parallelism: Mapping[str, int] = field(default_factory=dict)
    """Input name -> the parallelism its producer outside the region ran with."""


NOTHING = StageBytes()


@dataclass(frozen=True)
class _Choice:
    """One stage's parallelism before sizing, and what sizing reads of it."""

    stage: str
    parallelism: int
    consumed: int
    """Its non-broadcast consumed bytes: its output's size as an in-region consumer estimates it."""
    file_bytes: tuple[int, ...]
    leads: bool = False
    """It decided its forward group (or is a group of one): sizing may move it."""
    follows: str | None = None
    """The in-region stage that decided its forward group."""
    power_of_two: bool = False


def forward_group_peers(plan: DagPlan, region: str) -> tuple[str, ...]:
    """Stages outside ``region`` that share a forward group with one of its stages, in stage order."""
    members = set(plan.regions[region])
    groups = sorted({plan.stages[name].forward_group for name in plan.regions[region]})
    return tuple(peer for g in groups for peer in plan.forward_groups[g] if peer not in members)


def decide_region_sizing(
    plan: DagPlan,
    region: str,
    inputs: Mapping[str, StageBytes],
    config: ParallelismConfig,
    profile: ClusterProfile,
    ran_with: Mapping[str, int] | None = None,
) -> RegionSizing:
    """The region's application and every stage's sizing, as the provider decides them (see the module's docstring).

    ``ran_with``: the parallelism that stages of :func:`forward_group_peers` ran with in earlier regions.
    """
    members = plan.regions[region]
    inherited = _decided_elsewhere(plan, members, inputs, ran_with or {})
    leaders: dict[int, _Choice] = {}
    estimated: dict[str, int] = {}
    choices: list[_Choice] = []
    for name in members:
        choice = _decide_stage(plan, name, inputs.get(name, NOTHING), members, estimated, config, inherited, leaders)
        if choice.leads:
            leaders.setdefault(plan.stages[name].forward_group, choice)
        estimated[name] = choice.consumed
        choices.append(choice)
    demands = [
        StageDemand(
            c.stage,
            c.parallelism,
            consumed_bytes=c.consumed,
            min_parallelism=config.min_parallelism,
            max_parallelism=config.max_parallelism,
            memory_fraction=plan.stages[c.stage].memory_fraction,
            resources=plan.stages[c.stage].resources,
            fixed=not c.leads,
            input_file_bytes=c.file_bytes,
            power_of_two=c.power_of_two,
        )
        for c in choices
    ]
    return _aligned(size_region(demands, profile), choices)


def _decide_stage(
    plan: DagPlan,
    name: str,
    reads: StageBytes,
    members: Sequence[str],
    estimated: Mapping[str, int],
    config: ParallelismConfig,
    inherited: Mapping[int, int],
    leaders: Mapping[int, _Choice],
) -> _Choice:
    """One stage's parallelism: fixed, its group's from outside the region, its group leader's, or from its bytes."""
    stage = plan.stages[name]
    results, consumed, file_bytes = _consumption(plan, name, reads, members, estimated)
    grouped = len(plan.forward_groups[stage.forward_group]) > 1

    def within(value: int) -> int:  # a forward group's bounds (with one config for all: the config's)
        return min(max(value, config.min_parallelism), config.max_parallelism) if grouped else value

    if stage.fixed_parallelism is not None:
        return _Choice(name, stage.fixed_parallelism, consumed, file_bytes)
    if stage.forward_group in inherited:
        return _Choice(name, within(inherited[stage.forward_group]), consumed, file_bytes)
    leader = leaders.get(stage.forward_group)
    if leader is not None:
        return _Choice(name, leader.parallelism, consumed, file_bytes, follows=leader.stage)
    parallelism = within(explain_parallelism(results, config).parallelism)
    power_of_two = bool(results) and config.normalize == "power_of_two"
    return _Choice(name, parallelism, consumed, file_bytes, leads=True, power_of_two=power_of_two)


def _consumption(
    plan: DagPlan, name: str, reads: StageBytes, members: Sequence[str], estimated: Mapping[str, int]
) -> tuple[list[ConsumedResult], int, tuple[int, ...]]:
    """The stage's consumed results, its non-broadcast consumed bytes and the sizes of the files it scans."""
    results: list[ConsumedResult] = []
    by_input: dict[str, int] = {}
    broadcast: set[str] = set()
    file_bytes: list[int] = []
    for exchange in plan.stages[name].inputs:
        is_broadcast = exchange.distribution is Distribution.BROADCAST
        if exchange.producer in members:
            sizes = [estimated.get(exchange.producer, 0)]
        else:
            sizes = list(reads.upstream[exchange.input_name])
            if not is_broadcast:
                file_bytes.extend(sizes)
        results.append(ConsumedResult(sizes, broadcast=is_broadcast))
        by_input[exchange.input_name] = sum(sizes)
        if is_broadcast:
            broadcast.add(exchange.input_name)
    for input_name, files in reads.external.items():
        results.append(ConsumedResult(list(files)))
        by_input[input_name] = sum(files)
        file_bytes.extend(files)
    consumed = sum(v for k, v in by_input.items() if k not in broadcast)
    return results, consumed, tuple(file_bytes)


def _decided_elsewhere(
    plan: DagPlan, members: Sequence[str], inputs: Mapping[str, StageBytes], ran_with: Mapping[str, int]
) -> dict[int, int]:
    """Forward groups of the region already decided outside it -> their value (the first member's that ran)."""
    in_region = set(members)
    known = {peer: value for peer, value in ran_with.items() if peer not in in_region}
    for name in members:
        by_input = inputs.get(name, NOTHING).upstream_parallelism
        for exchange in plan.stages[name].inputs:
            forward_from_outside = exchange.distribution is Distribution.FORWARD and exchange.producer not in in_region
            if forward_from_outside and exchange.input_name in by_input:
                known.setdefault(exchange.producer, by_input[exchange.input_name])
    decided = {}
    for group in sorted({plan.stages[name].forward_group for name in members}):
        first = next((peer for peer in plan.forward_groups[group] if peer in known), None)
        if first is not None:
            decided[group] = known[first]
    return decided


def _aligned(sizing: RegionSizing, choices: Sequence[_Choice]) -> RegionSizing:
    """``sizing`` with every follower at its leader's sized count, waves and scan tasks."""
    stages = dict(sizing.stages)
    for choice in choices:
        if choice.follows is None:
            continue
        own, leader = sizing.stages[choice.stage], sizing.stages[choice.follows]
        balance = own.balance
        if leader.scan_tasks != own.scan_tasks:
            balance = decide_balance(
                choice.file_bytes, leader.scan_tasks, cores=sizing.slots * sizing.task_cpus, slots=sizing.slots
            )
        stages[choice.stage] = replace(
            own,
            parallelism=leader.parallelism,
            waves=leader.waves,
            tasks_per_executor=leader.tasks_per_executor,
            max_partition_bytes=(
                balance.max_partition_bytes if balance else split_bytes(choice.consumed, leader.scan_tasks)
            ),
            scan_parallelism=leader.scan_tasks,
            balance=balance,
        )
    return replace(sizing, stages=stages)
