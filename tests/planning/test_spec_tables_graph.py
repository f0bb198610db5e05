"""Hand-worked specification tables for the graph half of the planning core.

Covers ExchangeMode / Distribution, compute_pipelined_regions, compute_forward_groups and
propagate_forward_parallelism. Every expected value below was worked out by hand from the
written specification, not from the implementation.
"""

from __future__ import annotations

import pytest

from airflow_provider_finegrained.planning import (
    Distribution,
    ExchangeMode,
    compute_forward_groups,
    compute_pipelined_regions,
    propagate_forward_parallelism,
)

P = "pipelined"
B = "blocking"
F = "forward"
A2A = "all_to_all"
BC = "broadcast"


def fs(*names: str) -> frozenset[str]:
    return frozenset(names)


def assert_partition(groups: list[frozenset[str]], vertices: list[str]) -> None:
    """Every vertex is in exactly one group, and no group is empty or foreign."""
    seen: list[str] = []
    for group in groups:
        assert group, f"empty group in {groups}"
        seen.extend(group)
    assert sorted(seen) == sorted(vertices)


# ---------------------------------------------------------------------------------------------
# Enums
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("member", "value"),
    [
        pytest.param(ExchangeMode.BLOCKING, "blocking", id="exchange-blocking"),
        pytest.param(ExchangeMode.PIPELINED, "pipelined", id="exchange-pipelined"),
        pytest.param(Distribution.ALL_TO_ALL, "all_to_all", id="dist-all_to_all"),
        pytest.param(Distribution.FORWARD, "forward", id="dist-forward"),
        pytest.param(Distribution.BROADCAST, "broadcast", id="dist-broadcast"),
    ],
)
def test_enum_values_are_strings(member: ExchangeMode | Distribution, value: str) -> None:
    assert isinstance(member, str)
    assert member.value == value
    assert member == value
    assert type(member)(value) is member


@pytest.mark.parametrize(
    ("enum_cls", "values"),
    [
        pytest.param(ExchangeMode, {"blocking", "pipelined"}, id="exchange-members"),
        pytest.param(Distribution, {"all_to_all", "forward", "broadcast"}, id="dist-members"),
    ],
)
def test_enum_members_exactly(enum_cls: type, values: set[str]) -> None:
    assert {m.value for m in enum_cls} == values


@pytest.mark.parametrize(
    ("enum_cls", "bad"),
    [
        pytest.param(ExchangeMode, "streaming", id="exchange-unknown"),
        pytest.param(Distribution, "hash", id="dist-unknown"),
    ],
)
def test_enum_constructor_rejects_unknown(enum_cls: type, bad: str) -> None:
    with pytest.raises(ValueError, match=bad):
        enum_cls(bad)


def test_regions_reject_unknown_mode_string_naming_value_and_allowed() -> None:
    with pytest.raises(ValueError) as info:
        compute_pipelined_regions(["a", "b"], [("a", "b", "streaming")])
    msg = str(info.value)
    assert "streaming" in msg
    assert "blocking" in msg
    assert "pipelined" in msg


def test_forward_groups_reject_unknown_distribution_naming_value_and_allowed() -> None:
    with pytest.raises(ValueError) as info:
        compute_forward_groups(["a", "b"], [("a", "b", "hash_partitioned")])
    msg = str(info.value)
    assert "hash_partitioned" in msg
    assert "all_to_all" in msg
    assert "forward" in msg
    assert "broadcast" in msg


# ---------------------------------------------------------------------------------------------
# compute_pipelined_regions: set tables
# ---------------------------------------------------------------------------------------------

REGION_CASES = [
    pytest.param([], [], False, set(), id="empty-graph"),
    pytest.param(["x"], [], False, {fs("x")}, id="single-isolated-vertex"),
    pytest.param(
        ["a", "b", "c"],
        [("a", "b", P), ("b", "c", P)],
        False,
        {fs("a", "b", "c")},
        id="chain-all-pipelined-one-region",
    ),
    pytest.param(
        ["a", "b", "c"],
        [("a", "b", ExchangeMode.PIPELINED), ("b", "c", ExchangeMode.PIPELINED)],
        False,
        {fs("a", "b", "c")},
        id="chain-all-pipelined-enum-members",
    ),
    pytest.param(
        ["a", "b", "c"],
        [("a", "b", B), ("b", "c", B)],
        False,
        {fs("a"), fs("b"), fs("c")},
        id="chain-all-blocking-one-region-each",
    ),
    pytest.param(
        ["a", "b", "c"],
        [("a", "b", P), ("b", "c", B)],
        False,
        {fs("a", "b"), fs("c")},
        id="chain-pipelined-then-blocking",
    ),
    # Diamond a->{b,c}->d. a-p->b and c-p->d give {a,b} and {c,d}; blocking a->c and b->d both
    # go {a,b} -> {c,d}; nothing goes back, so no merge.
    pytest.param(
        ["a", "b", "c", "d"],
        [("a", "b", P), ("a", "c", B), ("b", "d", B), ("c", "d", P)],
        False,
        {fs("a", "b"), fs("c", "d")},
        id="diamond-mixed-two-regions",
    ),
    # Diamond with blocking fan-out and pipelined fan-in: {a} and {b,c,d} (b, c joined via d).
    pytest.param(
        ["a", "b", "c", "d"],
        [("a", "b", B), ("a", "c", B), ("b", "d", P), ("c", "d", P)],
        False,
        {fs("a"), fs("b", "c", "d")},
        id="diamond-blocking-out-pipelined-in",
    ),
    # Diamond: a-p->b-p->d makes {a,b,d}; c alone. a-b->c is {a,b,d} -> {c}, c-b->d is
    # {c} -> {a,b,d}: a cycle of regions, so everything merges.
    pytest.param(
        ["a", "b", "c", "d"],
        [("a", "b", P), ("a", "c", B), ("b", "d", P), ("c", "d", B)],
        False,
        {fs("a", "b", "c", "d")},
        id="diamond-mixed-cycle-merges-all",
    ),
    pytest.param(
        ["a", "b", "c", "d"],
        [("a", "b", B), ("a", "c", B), ("b", "d", B), ("c", "d", B)],
        False,
        {fs("a"), fs("b"), fs("c"), fs("d")},
        id="diamond-all-blocking",
    ),
    # The spec's example: {a,b} feeds c (a-b->c) and c feeds {a,b} (c-b->b) -> one region.
    pytest.param(
        ["a", "b", "c"],
        [("a", "b", P), ("a", "c", B), ("c", "b", B)],
        False,
        {fs("a", "b", "c")},
        id="blocking-cycle-merge-spec-example",
    ),
    # Transitive blocking shortcut a->c next to a->b->c is NOT a cycle: three regions stay apart.
    pytest.param(
        ["a", "b", "c"],
        [("a", "b", B), ("b", "c", B), ("a", "c", B)],
        False,
        {fs("a"), fs("b"), fs("c")},
        id="blocking-shortcut-is-not-a-cycle",
    ),
    # Three regions in a cycle: {a,b} -> {c} (a->c), {c} -> {d} (c->d), {d} -> {a,b} (d->b).
    # s before and e after are not on the cycle and stay separate.
    pytest.param(
        ["s", "a", "b", "c", "d", "e"],
        [
            ("s", "a", B),
            ("a", "b", P),
            ("a", "c", B),
            ("c", "d", B),
            ("d", "b", B),
            ("b", "e", B),
        ],
        False,
        {fs("s"), fs("a", "b", "c", "d"), fs("e")},
        id="three-region-cycle-with-tail-and-head",
    ),
    # Three two-stage regions {a,b}, {c,d}, {e,f}; a->c, c->e, e->b close the cycle
    # {a,b} -> {c,d} -> {e,f} -> {a,b}; the vertex graph itself is acyclic (a,c,e,b,d,f).
    pytest.param(
        ["a", "b", "c", "d", "e", "f"],
        [
            ("a", "b", P),
            ("c", "d", P),
            ("e", "f", P),
            ("a", "c", B),
            ("c", "e", B),
            ("e", "b", B),
        ],
        False,
        {fs("a", "b", "c", "d", "e", "f")},
        id="three-two-stage-regions-cycle",
    ),
    # Two separate merged cycles, linked by a plain blocking edge b->x: they must not merge together.
    pytest.param(
        ["a", "b", "c", "x", "y", "z"],
        [
            ("a", "b", P),
            ("a", "c", B),
            ("c", "b", B),
            ("b", "x", B),
            ("x", "y", P),
            ("x", "z", B),
            ("z", "y", B),
        ],
        False,
        {fs("a", "b", "c"), fs("x", "y", "z")},
        id="two-cycles-stay-separate",
    ),
    pytest.param(
        ["a", "b", "c"],
        [("a", "c", B), ("b", "c", B)],
        False,
        {fs("a"), fs("b"), fs("c")},
        id="disconnected-sources-blocking-default",
    ),
    pytest.param(
        ["a", "b", "c"],
        [("a", "c", B), ("b", "c", B)],
        True,
        {fs("a", "b"), fs("c")},
        id="disconnected-sources-blocking-all-sources-flag",
    ),
    pytest.param(
        ["a", "b", "c", "d"],
        [("a", "c", P), ("b", "d", P)],
        False,
        {fs("a", "c"), fs("b", "d")},
        id="two-pipelined-islands-default",
    ),
    pytest.param(
        ["a", "b", "c", "d"],
        [("a", "c", P), ("b", "d", P)],
        True,
        {fs("a", "b", "c", "d")},
        id="two-pipelined-islands-all-sources-flag",
    ),
    pytest.param(
        ["a", "b", "x"],
        [("a", "b", P)],
        False,
        {fs("a", "b"), fs("x")},
        id="isolated-vertex-own-region",
    ),
    # x has no incoming edge, so it is a source too and joins a's region.
    pytest.param(
        ["a", "b", "x"],
        [("a", "b", P)],
        True,
        {fs("a", "b", "x")},
        id="isolated-vertex-with-all-sources-flag",
    ),
    # Sources s1, s2. Without the flag: {s1}, {x}, {s2,y}. With the flag the virtual source joins
    # s1 and s2 pipelined -> {s1,s2,y}; then s1-b->x is {s1,s2,y} -> {x} and x-b->y is {x} -> {s1,s2,y},
    # a cycle, so all four merge.
    pytest.param(
        ["s1", "s2", "x", "y"],
        [("s1", "x", B), ("x", "y", B), ("s2", "y", P)],
        False,
        {fs("s1"), fs("x"), fs("s2", "y")},
        id="sources-flag-cycle-case-default",
    ),
    pytest.param(
        ["s1", "s2", "x", "y"],
        [("s1", "x", B), ("x", "y", B), ("s2", "y", P)],
        True,
        {fs("s1", "s2", "x", "y")},
        id="sources-flag-creates-cycle-merges-all",
    ),
]


@pytest.mark.parametrize(("vertices", "edges", "all_sources", "expected"), REGION_CASES)
def test_pipelined_regions_table(
    vertices: list[str],
    edges: list[tuple[str, str, str]],
    all_sources: bool,
    expected: set[frozenset[str]],
) -> None:
    regions = compute_pipelined_regions(vertices, edges, all_sources_in_one_region=all_sources)
    assert isinstance(regions, list)
    assert all(isinstance(r, frozenset) for r in regions)
    assert len(regions) == len(expected)
    assert set(regions) == expected
    assert_partition(regions, vertices)
    # Topological order: a region comes after every region it consumes from.
    index = {v: i for i, region in enumerate(regions) for v in region}
    for producer, consumer, _mode in edges:
        assert index[producer] <= index[consumer], (producer, consumer, regions)


# ---------------------------------------------------------------------------------------------
# compute_pipelined_regions: exact order on chains
# ---------------------------------------------------------------------------------------------

REGION_ORDER_CASES = [
    # Vertices given in reverse so that input order cannot stand in for topological order.
    pytest.param(
        ["d", "c", "b", "a"],
        [("a", "b", B), ("b", "c", B), ("c", "d", B)],
        False,
        [fs("a"), fs("b"), fs("c"), fs("d")],
        id="blocking-chain-reversed-input",
    ),
    pytest.param(
        ["c", "b", "a"],
        [("b", "c", ExchangeMode.BLOCKING), ("a", "b", ExchangeMode.BLOCKING)],
        False,
        [fs("a"), fs("b"), fs("c")],
        id="blocking-chain-enum-members-shuffled-edges",
    ),
    pytest.param(
        ["e", "d", "c", "b", "a", "s"],
        [
            ("s", "a", B),
            ("a", "b", P),
            ("a", "c", B),
            ("c", "d", B),
            ("d", "b", B),
            ("b", "e", B),
        ],
        False,
        [fs("s"), fs("a", "b", "c", "d"), fs("e")],
        id="merged-cycle-between-head-and-tail",
    ),
    pytest.param(
        ["z", "y", "x", "c", "b", "a"],
        [
            ("a", "b", P),
            ("a", "c", B),
            ("c", "b", B),
            ("b", "x", B),
            ("x", "y", P),
            ("x", "z", B),
            ("z", "y", B),
        ],
        False,
        [fs("a", "b", "c"), fs("x", "y", "z")],
        id="two-merged-cycles-in-order",
    ),
    pytest.param(
        ["c", "b", "a"],
        [("a", "c", B), ("b", "c", B)],
        True,
        [fs("a", "b"), fs("c")],
        id="all-sources-region-first",
    ),
    pytest.param(
        ["d", "c", "b", "a"],
        [("a", "b", B), ("b", "c", P), ("c", "d", B)],
        False,
        [fs("a"), fs("b", "c"), fs("d")],
        id="blocking-pipelined-blocking-chain",
    ),
]


@pytest.mark.parametrize(("vertices", "edges", "all_sources", "expected"), REGION_ORDER_CASES)
def test_pipelined_regions_order(
    vertices: list[str],
    edges: list[tuple[str, str, str]],
    all_sources: bool,
    expected: list[frozenset[str]],
) -> None:
    regions = compute_pipelined_regions(vertices, edges, all_sources_in_one_region=all_sources)
    assert regions == expected


@pytest.mark.parametrize(
    ("vertices", "edges", "missing"),
    [
        pytest.param(["a"], [("a", "ghost", B)], "ghost", id="unknown-consumer"),
        pytest.param(["a"], [("phantom", "a", P)], "phantom", id="unknown-producer"),
        pytest.param([], [("lonely_x", "lonely_y", P)], "lonely_x|lonely_y", id="no-vertices-at-all"),
    ],
)
def test_pipelined_regions_unknown_vertex(vertices: list[str], edges: list[tuple[str, str, str]], missing: str) -> None:
    with pytest.raises(ValueError, match=missing):
        compute_pipelined_regions(vertices, edges)


# ---------------------------------------------------------------------------------------------
# compute_forward_groups
# ---------------------------------------------------------------------------------------------

FORWARD_CASES = [
    pytest.param([], [], set(), id="empty"),
    pytest.param(["a", "b", "c"], [], {fs("a"), fs("b"), fs("c")}, id="no-edges-singletons"),
    pytest.param(
        ["a", "b", "c"],
        [("a", "b", F), ("b", "c", F)],
        {fs("a", "b", "c")},
        id="forward-chain-one-group",
    ),
    pytest.param(
        ["a", "b", "c"],
        [("a", "b", Distribution.FORWARD), ("b", "c", Distribution.FORWARD)],
        {fs("a", "b", "c")},
        id="forward-chain-enum-members",
    ),
    pytest.param(
        ["a", "b", "c"],
        [("a", "b", F), ("b", "c", A2A)],
        {fs("a", "b"), fs("c")},
        id="forward-then-all-to-all",
    ),
    pytest.param(
        ["a", "b"],
        [("a", "b", BC)],
        {fs("a"), fs("b")},
        id="broadcast-does-not-join",
    ),
    pytest.param(
        ["a", "b"],
        [("a", "b", Distribution.ALL_TO_ALL)],
        {fs("a"), fs("b")},
        id="all-to-all-does-not-join",
    ),
    # a and b are only linked through their shared consumer c: "either direction, transitively".
    pytest.param(
        ["a", "b", "c"],
        [("a", "c", F), ("b", "c", F)],
        {fs("a", "b", "c")},
        id="fan-in-forward-joins-siblings",
    ),
    # Fan-out from a: b and c joined through their shared producer a.
    pytest.param(
        ["a", "b", "c", "d"],
        [("a", "b", F), ("a", "c", F), ("c", "d", A2A)],
        {fs("a", "b", "c"), fs("d")},
        id="fan-out-forward",
    ),
    # a-f->b, b-all->c, c-f->d, x-f->d: {a,b}, {c,d,x}; y is isolated.
    pytest.param(
        ["a", "b", "c", "d", "x", "y"],
        [("a", "b", F), ("b", "c", A2A), ("c", "d", F), ("x", "d", F)],
        {fs("a", "b"), fs("c", "d", "x"), fs("y")},
        id="two-groups-and-isolated",
    ),
    # Mixed: a forward edge and a broadcast edge between the same pair still joins them.
    pytest.param(
        ["a", "b"],
        [("a", "b", BC), ("a", "b", F)],
        {fs("a", "b")},
        id="forward-plus-broadcast-same-pair",
    ),
]


@pytest.mark.parametrize(("vertices", "edges", "expected"), FORWARD_CASES)
def test_forward_groups_table(
    vertices: list[str], edges: list[tuple[str, str, str]], expected: set[frozenset[str]]
) -> None:
    groups = compute_forward_groups(vertices, edges)
    assert isinstance(groups, list)
    assert all(isinstance(g, frozenset) for g in groups)
    assert len(groups) == len(expected)
    assert set(groups) == expected
    assert_partition(groups, vertices)


# ---------------------------------------------------------------------------------------------
# propagate_forward_parallelism
# ---------------------------------------------------------------------------------------------

PROPAGATE_CASES = [
    pytest.param([fs("a", "b", "c")], {"a": 4}, {"a": 4, "b": 4, "c": 4}, id="one-decided-absent-rest"),
    pytest.param(
        [fs("a", "b", "c")],
        {"a": -1, "b": 6, "c": -1},
        {"a": 6, "b": 6, "c": 6},
        id="one-decided-minus-one-rest",
    ),
    pytest.param([fs("a", "b")], {"a": 5, "b": 5}, {"a": 5, "b": 5}, id="equal-decided-values-ok"),
    pytest.param([fs("a", "b")], {}, {"a": -1, "b": -1}, id="nothing-decided-stays-minus-one"),
    pytest.param([fs("a", "b")], {"a": -1, "b": -1}, {"a": -1, "b": -1}, id="all-minus-one-stays-minus-one"),
    pytest.param([fs("solo")], {"solo": 9}, {"solo": 9}, id="singleton-decided"),
    pytest.param([fs("solo")], {}, {"solo": -1}, id="singleton-undecided"),
    pytest.param(
        [fs("a", "b"), fs("c"), fs("d", "e")],
        {"b": 3, "c": 7},
        {"a": 3, "b": 3, "c": 7, "d": -1, "e": -1},
        id="several-groups-independent",
    ),
    # Values must not leak across groups: group 2 has nothing decided even though group 1 does.
    pytest.param(
        [fs("a", "b"), fs("c", "d")],
        {"a": 11, "b": -1},
        {"a": 11, "b": 11, "c": -1, "d": -1},
        id="no-leak-across-groups",
    ),
    pytest.param([], {}, {}, id="no-groups"),
]


@pytest.mark.parametrize(("groups", "parallelism", "expected"), PROPAGATE_CASES)
def test_propagate_forward_parallelism_table(
    groups: list[frozenset[str]], parallelism: dict[str, int], expected: dict[str, int]
) -> None:
    assert propagate_forward_parallelism(groups, parallelism) == expected


@pytest.mark.parametrize(
    ("groups", "parallelism", "names", "values"),
    [
        pytest.param(
            [fs("stage_alpha", "stage_beta")],
            {"stage_alpha": 12, "stage_beta": 40},
            ("stage_alpha", "stage_beta"),
            ("12", "40"),
            id="two-decided-differ",
        ),
        pytest.param(
            [fs("stage_alpha", "stage_mid", "stage_gamma"), fs("other")],
            {"stage_alpha": 17, "stage_mid": -1, "stage_gamma": 33, "other": 2},
            ("stage_alpha", "stage_gamma"),
            ("17", "33"),
            id="differ-with-undecided-between",
        ),
    ],
)
def test_propagate_forward_parallelism_conflict(
    groups: list[frozenset[str]],
    parallelism: dict[str, int],
    names: tuple[str, str],
    values: tuple[str, str],
) -> None:
    with pytest.raises(ValueError) as info:
        propagate_forward_parallelism(groups, parallelism)
    msg = str(info.value)
    for needle in (*names, *values):
        assert needle in msg, (needle, msg)


def test_forward_groups_feed_propagation_end_to_end() -> None:
    # a-f->b, b-all->c, c-f->d: groups {a,b}, {c,d}; only b and d decided.
    vertices = ["a", "b", "c", "d"]
    edges = [("a", "b", F), ("b", "c", A2A), ("c", "d", F)]
    groups = compute_forward_groups(vertices, edges)
    assert propagate_forward_parallelism(groups, {"b": 8, "d": 2}) == {"a": 8, "b": 8, "c": 2, "d": 2}
