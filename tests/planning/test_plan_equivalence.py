"""The planner's index-based graph steps give what the straightforward computations give.

Regions, forward groups and memory shares are computed on lists of stage numbers (for speed at
100,000 stages). Here, on seeded random DAGs, they are compared with plain reference versions kept
in this file: networkx components and condensation, the one-ulp-at-a-time share trimming, and
FLIP-187's formula in Fraction arithmetic for the parallelism decision.
"""

from __future__ import annotations

import math
import random
from fractions import Fraction

import networkx as nx
import pytest

from airflow_provider_finegrained.planning import (
    ConsumedResult,
    Distribution,
    ExchangeMode,
    ParallelismConfig,
    ResourceSpec,
    StageInput,
    StageSpec,
    compute_forward_groups,
    compute_pipelined_regions,
    explain_parallelism,
    managed_memory_fractions,
    plan_stages,
)
from airflow_provider_finegrained.planning.resources import shares_of

MODES = [ExchangeMode.BLOCKING, ExchangeMode.PIPELINED]
DISTRIBUTIONS = [Distribution.ALL_TO_ALL, Distribution.FORWARD, Distribution.BROADCAST]


def random_dag(seed: int) -> tuple[list[StageSpec], bool]:
    """A random DAG in shuffled declaration order, and whether to join its sources in one region."""
    rng = random.Random(seed)
    n = rng.randint(1, 60)
    pipelined_share = rng.choice([0.0, 0.2, 0.5, 0.9])
    specs = []
    for i in range(n):
        upstream = sorted(rng.sample(range(i), k=min(i, rng.randint(0, 3))))
        inputs = tuple(
            StageInput(
                f"s{u}",
                ExchangeMode.PIPELINED if rng.random() < pipelined_share else ExchangeMode.BLOCKING,
                rng.choice(DISTRIBUTIONS),
                name=f"in{k}",
            )
            for k, u in enumerate(upstream)
        )
        weight = rng.choice([1.0, 1.0, 1.0, 0.0, 0.5, 3.0])
        specs.append(StageSpec(f"s{i}", inputs, memory_weight=weight))
    rng.shuffle(specs)
    return specs, rng.random() < 0.3


def reference_regions(
    vertices: list[str], edges: list[tuple[str, str, ExchangeMode]], all_sources: bool
) -> list[frozenset[str]]:
    """Pipelined components, merged where they wait on each other, in topological order (networkx)."""
    pipelined: nx.Graph[str] = nx.Graph()
    pipelined.add_nodes_from(vertices)
    pipelined.add_edges_from((p, c) for p, c, mode in edges if mode is ExchangeMode.PIPELINED)
    if all_sources:
        sources = [v for v in vertices if v not in {c for _, c, _ in edges}]
        pipelined.add_edges_from((sources[0], s) for s in sources[1:])
    component = {v: i for i, members in enumerate(nx.connected_components(pipelined)) for v in members}
    graph: nx.DiGraph[int] = nx.DiGraph()
    graph.add_nodes_from(set(component.values()))
    graph.add_edges_from((component[p], component[c]) for p, c, _ in edges if component[p] != component[c])
    condensed = nx.condensation(graph)
    members: dict[int, list[str]] = {}
    for v in vertices:
        members.setdefault(condensed.graph["mapping"][component[v]], []).append(v)
    first_seen = {comp: i for i, comp in enumerate(members)}
    order = nx.lexicographical_topological_sort(condensed, key=first_seen.__getitem__)
    return [frozenset(members[comp]) for comp in order]


def reference_forward_groups(vertices: list[str], edges: list[tuple[str, str, Distribution]]) -> list[frozenset[str]]:
    graph: nx.Graph[str] = nx.Graph()
    graph.add_nodes_from(vertices)
    graph.add_edges_from((p, c) for p, c, d in edges if d is Distribution.FORWARD)
    groups = [frozenset(g) for g in nx.connected_components(graph)]
    return sorted(groups, key=lambda g: min(vertices.index(v) for v in g))


def reference_shares(amounts: list[float]) -> list[float]:
    """Trim the first largest share by one ulp until the plain and the exact sum are at most 1."""
    total = math.fsum(amounts)
    if total <= 0:
        return [0.0] * len(amounts)
    shares = [amount / total for amount in amounts]
    while max(sum(shares), math.fsum(shares)) > 1.0:
        largest = max(range(len(shares)), key=shares.__getitem__)
        shares[largest] = math.nextafter(shares[largest], 0.0)
    return shares


@pytest.mark.parametrize("seed", range(150))
def test_regions_and_forward_groups_equal_the_reference(seed: int) -> None:
    specs, all_sources = random_dag(seed)
    vertices = [s.name for s in specs]
    edges = [(i.upstream, s.name, i.mode, i.distribution) for s in specs for i in s.inputs]
    expected_regions = reference_regions(vertices, [(p, c, m) for p, c, m, _ in edges], all_sources)
    expected_groups = reference_forward_groups(vertices, [(p, c, d) for p, c, _, d in edges])

    regions = [(p, c, m) for p, c, m, _ in edges]
    assert compute_pipelined_regions(vertices, regions, all_sources_in_one_region=all_sources) == expected_regions
    assert compute_forward_groups(vertices, [(p, c, d) for p, c, _, d in edges]) == expected_groups

    plan = plan_stages(specs, all_sources_in_one_region=all_sources)
    position = {v: i for i, v in enumerate(vertices)}
    assert list(plan.regions.values()) == [tuple(sorted(r, key=position.__getitem__)) for r in expected_regions]
    assert plan.forward_groups == tuple(tuple(sorted(g, key=position.__getitem__)) for g in expected_groups)
    for members in plan.regions.values():
        weights = [next(s for s in specs if s.name == m).memory_weight for m in members]
        assert [plan.stages[m].memory_fraction for m in members] == reference_shares(weights)


@pytest.mark.parametrize("seed", range(300))
def test_shares_equal_the_reference(seed: int) -> None:
    rng = random.Random(seed)
    if seed < 150:
        amounts = [1.0] * (seed + 1)  # equal shares are the ones that need trimming most
    else:
        pool = [0.0, 1.0, 3.0, 0.1, rng.random(), float(rng.randint(1, 10**9))]
        amounts = [rng.choice(pool) for _ in range(rng.randint(1, 80))]
    assert shares_of(amounts) == reference_shares(amounts)


def test_managed_memory_fractions_of_a_large_group_equal_the_reference() -> None:
    """500 equal stages need 8,012 trims (quadratic when summing after each one)."""
    specs: dict[str, ResourceSpec | None] = {f"s{i}": None for i in range(500)}
    fractions = managed_memory_fractions(specs, dict.fromkeys(specs, "g"))
    assert list(fractions.values()) == reference_shares([1.0] * 500)
    assert len(set(fractions.values())) == 2  # some shares were trimmed


def reference_computed_and_counted(consumed: list[ConsumedResult], config: ParallelismConfig) -> tuple[int, int]:
    """``ceil(non_broadcast / (V - min(broadcast, ratio * V)))`` and the counted broadcast bytes, in Fractions."""
    non_broadcast = sum(r.total_bytes for r in consumed if not r.broadcast)
    broadcast = sum(r.total_bytes for r in consumed if r.broadcast)
    per_task = config.avg_bytes_per_task
    ratio = Fraction(config.max_broadcast_ratio).limit_denominator(10**9)
    counted = min(Fraction(broadcast), ratio * per_task)
    return math.ceil(Fraction(non_broadcast) / (per_task - counted)), math.floor(counted)


@pytest.mark.parametrize("seed", range(40))
def test_parallelism_arithmetic_equals_the_fraction_reference(seed: int) -> None:
    rng = random.Random(seed)
    config = ParallelismConfig(
        max_parallelism=rng.choice([8, 256, 10**6]),
        avg_bytes_per_task=rng.choice([7, 1000, 3 * 2**20, 64 * 2**20]),
        max_broadcast_ratio=rng.choice([0, 0.1, 0.3, 0.5, 0.9, 0.123456789, 1 / 3]),
    )
    for _ in range(200):
        consumed = [
            ConsumedResult(
                [rng.randint(0, rng.choice([10, 1000, 64 * 2**20])) for _ in range(rng.randint(0, 4))],
                broadcast=rng.random() < 0.4,
            )
            for _ in range(rng.randint(1, 4))
        ]
        decision = explain_parallelism(consumed, config)
        computed, counted = reference_computed_and_counted(consumed, config)
        assert (decision.computed, decision.counted_broadcast_bytes) == (computed, counted)
