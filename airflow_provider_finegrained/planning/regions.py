"""Pipelined regions (FLIP-53 / Flink's PipelinedRegionComputeUtil).

Stages joined by pipelined edges run together; blocking edges separate them. Regions that would
wait on each other in a cycle of blocking edges are merged, so that no region ever waits for itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from airflow_provider_finegrained.planning._index_graph import (
    component_labels,
    members_by_label,
    smallest_first_topological_order,
    strongly_connected,
)
from airflow_provider_finegrained.planning.enums import ExchangeMode, coerce_enum

Edge = tuple[str, str, ExchangeMode | str]


def compute_pipelined_regions(
    vertices: Iterable[str],
    edges: Iterable[Edge],
    *,
    all_sources_in_one_region: bool = False,
) -> list[frozenset[str]]:
    """Partition ``vertices`` into pipelined regions, returned in topological order.

    ``edges`` are ``(producer, consumer, mode)``. With ``all_sources_in_one_region`` every source
    stage (one with no input) joins one region, as if a virtual source fed them all pipelined.
    """
    order = list(dict.fromkeys(vertices))
    position = {v: i for i, v in enumerate(order)}
    producers: list[int] = []
    consumers: list[int] = []
    pipelined: list[tuple[int, int]] = []
    for producer, consumer, mode in edges:
        for end in (producer, consumer):
            if end not in position:
                raise ValueError(f"edge {producer!r} -> {consumer!r} names unknown stage {end!r}")
        p, c = position[producer], position[consumer]
        producers.append(p)
        consumers.append(c)
        if coerce_enum(ExchangeMode, mode, what="exchange mode") is ExchangeMode.PIPELINED:
            pipelined.append((p, c))
    sources = None
    if all_sources_in_one_region:
        has_input = set(consumers)
        sources = [i for i in range(len(order)) if i not in has_input]
    regions = region_members(len(order), producers, consumers, pipelined, sources)
    return [frozenset(order[i] for i in members) for members in regions]


def region_members(
    n: int,
    producers: Sequence[int],
    consumers: Sequence[int],
    pipelined: Iterable[tuple[int, int]],
    joined_sources: Sequence[int] | None = None,
) -> list[list[int]]:
    """Regions of stages ``0..n-1`` as ascending lists of stage indices, in topological order.

    Edges are ``producers[k] -> consumers[k]``; ``pipelined`` lists the pipelined ones again as
    pairs. ``joined_sources`` (if given) are put into one region. Ties in the topological order go
    to the region whose first stage comes first.
    """
    pairs: Iterable[tuple[int, int]] = pipelined
    if joined_sources:
        first = joined_sources[0]
        pairs = [*pipelined, *((first, s) for s in joined_sources[1:])]
    region_of, count = component_labels(n, pairs)

    # Regions become nodes; blocking edges between them become dependencies. Strongly connected
    # components of that graph would deadlock, so each becomes one region. Pipelined edges never
    # cross regions, so every crossing edge is a blocking one.
    successors: list[list[int]] = [[] for _ in range(count)]
    for p, c in zip(producers, consumers, strict=True):
        a, b = region_of[p], region_of[c]
        if a != b:
            successors[a].append(b)
    order = smallest_first_topological_order(successors)
    if order is None:
        merged_of, merged_count = _merge_cycles(successors)
        region_of = [merged_of[r] for r in region_of]
        merged: list[list[int]] = [[] for _ in range(merged_count)]
        for a, targets in enumerate(successors):
            ma = merged_of[a]
            add = merged[ma].append
            for b in targets:
                mb = merged_of[b]
                if mb != ma:
                    add(mb)
        order = smallest_first_topological_order(merged)
        if order is None:  # cannot happen: merging strongly connected components leaves a DAG
            raise AssertionError("regions still form a cycle after merging strongly connected components")
        count = merged_count
    members = members_by_label(region_of, count, range(n))
    return [members[r] for r in order]


def _merge_cycles(successors: Sequence[Sequence[int]]) -> tuple[list[int], int]:
    """Merge each strongly connected set of regions; number the results by their first region."""
    component, count = strongly_connected(successors)
    # Renumber so that merged regions keep the order of their first (lowest) region, which is
    # the order of their first stage: the topological sort breaks ties by it.
    renumber = [-1] * count
    merged_count = 0
    for c in component:
        if renumber[c] < 0:
            renumber[c] = merged_count
            merged_count += 1
    return [renumber[c] for c in component], merged_count


def region_index(regions: Sequence[frozenset[str]]) -> dict[str, int]:
    """Map each stage to the position of its region in ``regions``."""
    return {stage: i for i, region in enumerate(regions) for stage in region}
