"""Forward groups (FLIP-187): stages joined by forward edges share one parallelism."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from airflow_provider_finegrained.planning._index_graph import component_labels, members_by_label
from airflow_provider_finegrained.planning.enums import Distribution, coerce_enum

UNDECIDED = -1
"""Marks a stage whose parallelism is not decided yet."""


def compute_forward_groups(
    vertices: Iterable[str], edges: Iterable[tuple[str, str, Distribution | str]]
) -> list[frozenset[str]]:
    """Partition ``vertices`` into forward groups; a stage with no forward edge is a group of one.

    Groups come in the order of their first member in ``vertices``.
    """
    order = list(dict.fromkeys(vertices))
    position = {v: i for i, v in enumerate(order)}
    forward: list[tuple[int, int]] = []
    for producer, consumer, distribution in edges:
        for end in (producer, consumer):
            if end not in position:
                raise ValueError(f"edge {producer!r} -> {consumer!r} names unknown stage {end!r}")
        if coerce_enum(Distribution, distribution, what="distribution") is Distribution.FORWARD:
            forward.append((position[producer], position[consumer]))
    labels, count = component_labels(len(order), forward)
    return [frozenset(members) for members in members_by_label(labels, count, order)]


def propagate_forward_parallelism(groups: Iterable[Iterable[str]], parallelism: Mapping[str, int]) -> dict[str, int]:
    """Give every undecided stage (absent or -1) its forward group's decided parallelism.

    A group with no decided stage stays at -1. Two different decided values in one group are an
    error naming both stages and both values. Stages outside every group are returned unchanged.
    """
    result = dict(parallelism)
    for group in groups:
        members = sorted(group)
        decided_by: str | None = None
        for stage in members:
            value = parallelism.get(stage, UNDECIDED)
            if value == UNDECIDED:
                continue
            if decided_by is None:
                decided_by = stage
            elif value != parallelism[decided_by]:
                raise ValueError(
                    f"forward group {members}: stage {decided_by!r} has parallelism "
                    f"{parallelism[decided_by]} but stage {stage!r} has parallelism {value}; "
                    "stages joined by forward edges must share one parallelism"
                )
        group_value = parallelism[decided_by] if decided_by is not None else UNDECIDED
        for stage in members:
            result[stage] = group_value
    return result


@dataclass(frozen=True)
class GroupBounds:
    """The parallelism range every member of a forward group allows, and which members set it."""

    low: int
    high: int
    low_stage: str
    """The member whose ``min_parallelism`` is the group's (the highest minimum)."""
    high_stage: str
    """The member whose ``max_parallelism`` is the group's (the lowest maximum)."""

    def clamp(self, parallelism: int) -> int:
        return max(self.low, min(self.high, parallelism))


def intersect_bounds(bounds: Mapping[str, tuple[int, int]]) -> GroupBounds:
    """Intersect forward group members' ``(min_parallelism, max_parallelism)``: the highest min, the lowest max.

    One parallelism serves every member (FLIP-187), so it must satisfy every member's bounds. Ties
    go to the member listed first. An empty intersection is an error naming both stages and bounds.
    """
    if not bounds:
        raise ValueError("a forward group needs at least one stage")
    members = list(bounds)
    low_stage = high_stage = members[0]
    for stage in members[1:]:
        if bounds[stage][0] > bounds[low_stage][0]:
            low_stage = stage
        if bounds[stage][1] < bounds[high_stage][1]:
            high_stage = stage
    low, high = bounds[low_stage][0], bounds[high_stage][1]
    if low > high:
        raise ValueError(
            f"forward group {members} must share one parallelism, but stage {low_stage!r} has "
            f"min_parallelism {low} and stage {high_stage!r} has max_parallelism {high}"
        )
    return GroupBounds(low, high, low_stage, high_stage)
