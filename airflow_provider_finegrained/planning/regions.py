"""Pipelined regions (FLIP-53 / Flink's PipelinedRegionComputeUtil).

Stages joined by pipelined edges run together; blocking edges separate them. Regions that would
wait on each other in a cycle of blocking edges are merged, so that no region ever waits for itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import networkx as nx

from airflow_provider_finegrained.planning._union_find import UnionFind
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
    known = set(order)
    checked = _check_edges(known, edges)
    uf: UnionFind[str] = UnionFind(order)
    for producer, consumer, mode in checked:
        if mode is ExchangeMode.PIPELINED:
            uf.union(producer, consumer)
    if all_sources_in_one_region:
        consumers = {consumer for _, consumer, _ in checked}
        sources = [v for v in order if v not in consumers]
        for source in sources[1:]:
            uf.union(sources[0], source)

    # Regions become nodes; blocking edges between them become dependencies. Strongly connected
    # components of that graph would deadlock, so each becomes one region.
    region_of = {v: uf.find(v) for v in order}
    region_graph: nx.DiGraph[str] = nx.DiGraph()
    region_graph.add_nodes_from(dict.fromkeys(region_of.values()))
    region_graph.add_edges_from((region_of[p], region_of[c]) for p, c, _ in checked if region_of[p] != region_of[c])
    condensed = nx.condensation(region_graph)
    members: dict[int, list[str]] = {}
    component_of_root = condensed.graph["mapping"]
    for v in order:
        members.setdefault(component_of_root[region_of[v]], []).append(v)
    # Topological order, ties broken by the first appearance of a member in ``vertices``.
    # ``members`` was filled walking ``order``, so its key order is the order of first appearance.
    first_seen = {comp: i for i, comp in enumerate(members)}
    topo = nx.lexicographical_topological_sort(condensed, key=lambda comp: first_seen[comp])
    return [frozenset(members[comp]) for comp in topo]


def _check_edges(known: set[str], edges: Iterable[Edge]) -> list[tuple[str, str, ExchangeMode]]:
    checked: list[tuple[str, str, ExchangeMode]] = []
    for producer, consumer, mode in edges:
        for end in (producer, consumer):
            if end not in known:
                raise ValueError(f"edge {producer!r} -> {consumer!r} names unknown stage {end!r}")
        checked.append((producer, consumer, coerce_enum(ExchangeMode, mode, what="exchange mode")))
    return checked


def region_index(regions: Sequence[frozenset[str]]) -> dict[str, int]:
    """Map each stage to the position of its region in ``regions``."""
    return {stage: i for i, region in enumerate(regions) for stage in region}
