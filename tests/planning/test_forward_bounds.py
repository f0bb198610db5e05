"""Forward groups share one parallelism, so it must satisfy every member's bounds (FLIP-187).

Hand-worked tables for ``intersect_bounds`` (the highest min, the lowest max) and for the parse-time
checks ``plan_stages`` makes with it: disjoint bounds, a fixed parallelism outside a member's bounds.
"""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_finegrained.planning import GroupBounds, StageGraphError, StageSpec, intersect_bounds, plan_stages

S = StageSpec.build
FWD = {"mode": "pipelined", "distribution": "forward"}

INTERSECT_CASES = [
    pytest.param({"a": (1, 128)}, GroupBounds(1, 128, "a", "a"), id="group-of-one"),
    pytest.param({"a": (1, 128), "b": (1, 8)}, GroupBounds(1, 8, "a", "b"), id="consumer-max-8"),
    # max(1, 4, 2) = 4 from b; min(64, 32, 12) = 12 from c.
    pytest.param({"a": (1, 64), "b": (4, 32), "c": (2, 12)}, GroupBounds(4, 12, "b", "c"), id="chain-of-three"),
    # Ties go to the member listed first: a sets both.
    pytest.param({"a": (3, 9), "b": (3, 9)}, GroupBounds(3, 9, "a", "a"), id="tie-first-listed"),
    # The intersection may be a single value.
    pytest.param({"a": (5, 20), "b": (1, 5)}, GroupBounds(5, 5, "a", "b"), id="touching-bounds"),
]


@pytest.mark.parametrize(("bounds", "expected"), INTERSECT_CASES)
def test_intersect_bounds_table(bounds: dict[str, tuple[int, int]], expected: GroupBounds) -> None:
    assert intersect_bounds(bounds) == expected


CLAMP_CASES = [(0, 4), (4, 4), (7, 7), (12, 12), (13, 12), (76, 12)]


@pytest.mark.parametrize(("value", "expected"), CLAMP_CASES)
def test_group_bounds_clamp(value: int, expected: int) -> None:
    assert GroupBounds(4, 12, "b", "c").clamp(value) == expected


@pytest.mark.parametrize(
    ("bounds", "message"),
    [
        pytest.param(
            {"a": (10, 20), "b": (1, 5)},
            r"forward group \['a', 'b'\] must share one parallelism, but stage 'a' has min_parallelism 10 "
            r"and stage 'b' has max_parallelism 5",
            id="min-above-max",
        ),
        pytest.param(
            {"a": (1, 64), "b": (16, 32), "c": (1, 12)},
            "stage 'b' has min_parallelism 16 and stage 'c' has max_parallelism 12",
            id="chain-of-three-disjoint",
        ),
        pytest.param({}, "at least one stage", id="empty"),
    ],
)
def test_intersect_bounds_empty_is_an_error_naming_stages(bounds: dict[str, tuple[int, int]], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        intersect_bounds(bounds)


PARSE_ERRORS = [
    pytest.param(
        [S("a", min_parallelism=10), S("b", {"x": {"upstream": "a", **FWD}}, max_parallelism=5)],
        "stage 'a' has min_parallelism 10 and stage 'b' has max_parallelism 5",
        id="two-stage-min-above-max",
    ),
    pytest.param(
        [
            S("a", max_parallelism=64),
            S("b", {"x": {"upstream": "a", **FWD}}, min_parallelism=16, max_parallelism=32),
            S("c", {"x": {"upstream": "b", **FWD}}, max_parallelism=12),
        ],
        r"forward group \['a', 'b', 'c'\] must share one parallelism, but stage 'b' has min_parallelism 16 "
        "and stage 'c' has max_parallelism 12",
        id="chain-of-three-disjoint",
    ),
    pytest.param(
        [S("a", parallelism=10), S("b", {"x": {"upstream": "a", **FWD}}, max_parallelism=8)],
        r"forward group \['a', 'b'\] runs at the fixed parallelism 10, outside stage 'b''s bounds \[None, 8\]",
        id="fixed-above-a-members-max",
    ),
    pytest.param(
        [
            S("a", parallelism=2),
            S("b", {"x": {"upstream": "a", **FWD}}),
            S("c", {"x": {"upstream": "b", **FWD}}, min_parallelism=3),
        ],
        r"runs at the fixed parallelism 2, outside stage 'c''s bounds \[3, None\]",
        id="fixed-below-a-members-min",
    ),
]


@pytest.mark.parametrize(("specs", "message"), PARSE_ERRORS)
def test_plan_rejects_forward_groups_whose_bounds_cannot_hold(specs: list[StageSpec], message: str) -> None:
    with pytest.raises(StageGraphError, match=message):
        plan_stages(specs)


PARSE_OK: list[Any] = [
    pytest.param(
        [S("a", parallelism=6), S("b", {"x": {"upstream": "a", **FWD}}, max_parallelism=8)],
        {"a": 6, "b": 6},
        id="fixed-within-every-members-bounds",
    ),
    pytest.param(
        [S("a", max_parallelism=64), S("b", {"x": {"upstream": "a", **FWD}}, min_parallelism=4, max_parallelism=32)],
        {"a": None, "b": None},
        id="overlapping-bounds-undecided",
    ),
]


@pytest.mark.parametrize(("specs", "fixed"), PARSE_OK)
def test_plan_accepts_forward_groups_whose_bounds_overlap(specs: list[StageSpec], fixed: dict[str, int | None]) -> None:
    plan = plan_stages(specs)
    assert {n: s.fixed_parallelism for n, s in plan.stages.items()} == fixed
