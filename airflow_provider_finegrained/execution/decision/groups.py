"""Forward groups, resolved for a region before any of its stages is decided. Pure.

Stages of one forward group share one parallelism (FLIP-187). For each group with a member in the region
this says, before any stage is decided: the bounds every member allows, whether a region that ran earlier
already decided it (and with what), and which member of the region decides it otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from airflow_provider_finegrained.execution.decision.inputs import StageInputs
from airflow_provider_finegrained.planning import (
    DagPlan,
    Distribution,
    GroupBounds,
    ParallelismConfig,
    intersect_bounds,
)


@dataclass(frozen=True)
class Inherited:
    """A group decided by a region that ran earlier: the member that ran and the value the region takes."""

    source: str
    parallelism: int
    """Within the group's bounds here."""
    clamped_from: int | None = None
    """The value it ran with, when that was outside the bounds here (the earlier region ran under other settings)."""


@dataclass(frozen=True)
class GroupPlan:
    """One forward group as a region sees it before deciding."""

    group: int
    members: tuple[str, ...]
    bounds: GroupBounds | None
    """The intersection of every member's bounds; None for a group of one."""
    inherited: Inherited | None
    first: str | None
    """The region's first member (in region order) whose parallelism is not fixed: it decides the group when
    nothing was inherited, else it carries the note of a clamped inherited value."""

    @property
    def leader(self) -> str | None:
        """The member of the region that decides the group (None: inherited or fixed)."""
        return None if self.inherited is not None else self.first


def resolve_groups(
    plan: DagPlan,
    region: str,
    inputs: Mapping[str, StageInputs],
    config_for: Callable[[str], ParallelismConfig],
    ran_with: Mapping[str, int],
) -> dict[int, GroupPlan]:
    """Every forward group with a member in ``region``, resolved before any stage is decided.

    A group already decided in a region that ran earlier passes its value on: through a forward edge from a
    stage outside this region (``StageInputs.upstream_parallelism``) or through any other member of the group
    that ran (``ran_with``), so a group whose members sit in several regions is decided once.
    """
    members = plan.regions[region]
    elsewhere = decided_elsewhere(plan, members, inputs, ran_with)
    firsts: dict[int, str] = {}
    for name in members:
        if plan.stages[name].fixed_parallelism is None:
            firsts.setdefault(plan.stages[name].forward_group, name)
    resolved: dict[int, GroupPlan] = {}
    for name in members:
        group = plan.stages[name].forward_group
        if group in resolved:
            continue
        bounds = group_bounds(plan.forward_groups[group], config_for)
        first = firsts.get(group)
        inherited = None
        if group in elsewhere:
            source, value = elsewhere[group]
            clamped = value if bounds is None else bounds.clamp(value)
            inherited = Inherited(source, clamped, None if clamped == value else value)
        resolved[group] = GroupPlan(group, plan.forward_groups[group], bounds, inherited, first)
    return resolved


def group_bounds(group: Sequence[str], config_for: Callable[[str], ParallelismConfig]) -> GroupBounds | None:
    """The forward group's bounds at run time (each member's settings), or None for a group of one."""
    if len(group) < 2:
        return None
    configs = {member: config_for(member) for member in group}
    return intersect_bounds({m: (c.min_parallelism, c.max_parallelism) for m, c in configs.items()})


def forward_group_peers(plan: DagPlan, region: str) -> tuple[str, ...]:
    """Stages outside ``region`` that share a forward group with one of its stages, in stage order.

    A region that runs after one of them takes the group's parallelism from its recorded trace
    (``decide_region``'s ``ran_with``) instead of deciding the group a second time.
    """
    members = plan.regions[region]
    in_region = set(members)
    groups = sorted({plan.stages[name].forward_group for name in members})
    return tuple(peer for g in groups for peer in plan.forward_groups[g] if peer not in in_region)


def decided_elsewhere(
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
