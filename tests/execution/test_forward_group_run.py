"""A forward group runs at one parallelism that every member's bounds allow, before and after sizing.

The defect this guards: a -> b pipelined forward with b.max_parallelism=8 decided 50 for b (a's
decision, taken as given) and ran it with 76 (a's parallelism after its memory floor raised it).
Every expected value below is worked out by hand in the comments; V = avg_bytes_per_task = 64 MiB.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from airflow_provider_finegrained.contract import OutputRecord
from airflow_provider_finegrained.execution.decision import ExternalSizes, StageInputs, decide_region
from airflow_provider_finegrained.planning import ClusterProfile, DagPlan, ParallelismConfig, StageSpec, plan_stages

MiB = 2**20
GiB = 2**30
S = StageSpec.build
FWD = {"mode": "pipelined", "distribution": "forward"}
BLOCKING_FWD = {"mode": "blocking", "distribution": "forward"}
# 4 slots in one local JVM; a tiny memory expansion keeps memory floors at 1 so the tables show
# the forward-group rule and even waves alone.
NO_FLOOR = ClusterProfile(
    total_cores=4, total_memory=64 * GiB, executor_memory=16 * GiB, local=True, memory_expansion=0.01
)


def configs(plan: DagPlan, **connection: Any) -> Callable[[str], ParallelismConfig]:
    """Each stage's config as the operator builds it: the connection's, with the stage's declared bounds."""

    def config_for(stage: str) -> ParallelismConfig:
        declared = plan.stages[stage]
        overrides = {
            k: v
            for k, v in (("min_parallelism", declared.min_parallelism), ("max_parallelism", declared.max_parallelism))
            if v is not None
        }
        return ParallelismConfig(**{"avg_bytes_per_task": "64m", **connection, **overrides})

    return config_for


def source(v_units: int) -> StageInputs:
    """A source reading ``v_units`` * 64 MiB of files (so it computes ``v_units`` tasks)."""
    return StageInputs(external={"t": ExternalSizes("/data/t", "parquet", [v_units * 64 * MiB])})


def decide(
    specs: list[StageSpec], inputs: Mapping[str, StageInputs], profile: ClusterProfile = NO_FLOOR, **connection: Any
) -> dict[str, tuple[int, int]]:
    plan = plan_stages(specs)
    decisions: dict[str, tuple[int, int]] = {}
    for region in plan.regions:
        decision = decide_region(plan, region, inputs, configs(plan, **connection), profile)
        for name, trace in decision.traces.items():
            assert trace.parallelism is not None
            decisions[name] = (trace.decided_parallelism, trace.parallelism)
    return decisions


CASES = [
    # The reported defect: a computes 3200 / 64 = 50; the group's bounds are [1, min(128, 8)] = [1, 8],
    # so a decides 8 for the group; 8 on 4 slots is two full waves; b runs 8 too.
    pytest.param(
        [S("a"), S("b", {"x": {"upstream": "a", **FWD}}, max_parallelism=8)],
        {"a": source(50)},
        {"a": (8, 8), "b": (8, 8)},
        id="consumer-max-8",
    ),
    # Chain of three, bounds a [1, 64], b [4, 32], c [1, 12]: the group's are [4, 12]. a computes 20,
    # clamped to 12 (three waves of 4).
    pytest.param(
        [
            S("a", max_parallelism=64),
            S("b", {"x": {"upstream": "a", **FWD}}, min_parallelism=4, max_parallelism=32),
            S("c", {"x": {"upstream": "b", **FWD}}, max_parallelism=12),
        ],
        {"a": source(20)},
        {"a": (12, 12), "b": (12, 12), "c": (12, 12)},
        id="chain-of-three-clamped-to-lowest-max",
    ),
    # Same chain, a computes 2: raised to b's min 4 (one full wave).
    pytest.param(
        [
            S("a", max_parallelism=64),
            S("b", {"x": {"upstream": "a", **FWD}}, min_parallelism=4, max_parallelism=32),
            S("c", {"x": {"upstream": "b", **FWD}}, max_parallelism=12),
        ],
        {"a": source(2)},
        {"a": (4, 4), "b": (4, 4), "c": (4, 4)},
        id="chain-of-three-raised-to-highest-min",
    ),
    # Group [1, 11]: a computes 11; even waves on 4 slots prefer 12 (1 away, tie rule) but 12 > 11,
    # so it goes down to 8. Nobody runs above 11.
    pytest.param(
        [S("a"), S("b", {"x": {"upstream": "a", **FWD}}, max_parallelism=11)],
        {"a": source(11)},
        {"a": (11, 8), "b": (11, 8)},
        id="even-waves-never-above-the-groups-max",
    ),
    # Group [1, 16]: a computes 11 -> 12 for even waves (12 <= 16), and b runs 12 with it.
    pytest.param(
        [S("a"), S("b", {"x": {"upstream": "a", **FWD}}, max_parallelism=16)],
        {"a": source(11)},
        {"a": (11, 12), "b": (11, 12)},
        id="even-waves-within-the-groups-max",
    ),
    # A fixed parallelism spreads to the group (parse time checked it is within 8); sizing leaves it.
    pytest.param(
        [S("a", parallelism=6), S("b", {"x": {"upstream": "a", **FWD}}, max_parallelism=8)],
        {"a": source(50)},
        {"a": (6, 6), "b": (6, 6)},
        id="fixed-parallelism-in-the-group",
    ),
    # a and b both feed c forward: one group {a, b, c}. a decides (5 -> 4 for even waves), b takes the
    # group's value instead of its own 30, c follows a.
    pytest.param(
        [
            S("a"),
            S("b"),
            S("c", {"x": {"upstream": "a", **FWD}, "y": {"upstream": "b", **FWD}}, max_parallelism=40),
        ],
        {"a": source(5), "b": source(30)},
        {"a": (5, 4), "b": (5, 4), "c": (5, 4)},
        id="two-forward-producers-share-the-groups-value",
    ),
    # A source's default parallelism is taken as given alone, but its group's max still bounds it.
    pytest.param(
        [S("a"), S("b", {"x": {"upstream": "a", **FWD}}, max_parallelism=8)],
        {},
        {"a": (8, 8), "b": (8, 8)},
        id="source-default-clamped-by-the-group",
    ),
]


@pytest.mark.parametrize(("specs", "inputs", "expected"), CASES)
def test_forward_group_decisions_table(
    specs: list[StageSpec], inputs: Mapping[str, StageInputs], expected: dict[str, tuple[int, int]]
) -> None:
    assert decide(specs, inputs, default_source_parallelism=50) == expected


def test_the_reported_case_names_the_bound_in_the_trace() -> None:
    plan = plan_stages([S("a"), S("b", {"x": {"upstream": "a", **FWD}}, max_parallelism=8)])
    decision = decide_region(plan, "region-1", {"a": source(50)}, configs(plan), NO_FLOOR)
    a, b = decision.traces["a"], decision.traces["b"]
    assert a.computed_parallelism == 50
    assert a.rule == "clamped to max_parallelism (forward group bounds: max 8 from 'b')"
    assert b.rule == "forward edge: same as 'a'"
    assert b.config["max_parallelism"] == 8
    assert decision.sizing.stages["b"].session_conf()["spark.sql.shuffle.partitions"] == "8"


# A small executor: per task (1024 - 300) MiB * 0.6 / 4 slots = 108.6 MiB, a's half of it 54.3 MiB.
# a reads 3200 MiB: computed 3200 / 64 = 50, memory floor ceil(3200 * 3 / 54.3) = 177.
TIGHT = ClusterProfile(total_cores=4, total_memory=8 * GiB, executor_memory=GiB, local=True)

FLOOR_CASES = [
    # Before the fix: a raised to its floor (capped by its own max 128), b copied it past its max 8.
    pytest.param(8, (8, 8), id="floor-capped-by-consumers-max-8"),
    # The floor raises a to the group's max 100 (25 waves of 4); b runs 100, its max.
    pytest.param(100, (50, 100), id="floor-raises-to-the-groups-max"),
    # Raised to 102, the group's max: 100 and 104 would be even waves, but 104 > 102 and 100 is below
    # the floor 177, so 102 stays (two slots idle in the last wave rather than above the max).
    pytest.param(102, (50, 102), id="floor-and-even-waves-never-above-max"),
]


@pytest.mark.parametrize(("b_max", "expected"), FLOOR_CASES)
def test_memory_floor_never_lifts_a_forward_group_past_a_members_max(b_max: int, expected: tuple[int, int]) -> None:
    got = decide([S("a"), S("b", {"x": {"upstream": "a", **FWD}}, max_parallelism=b_max)], {"a": source(50)}, TIGHT)
    assert got == {"a": expected, "b": expected}
    assert max(ran for _, ran in got.values()) <= b_max


def test_forward_consumer_in_a_later_region_takes_what_its_producer_ran_with() -> None:
    plan = plan_stages([S("a"), S("b", {"x": {"upstream": "a", **BLOCKING_FWD}}, max_parallelism=8)])
    record = OutputRecord("a", "/out/a", "parquet", [64 * MiB] * 30, 10, 1)
    inputs = {"b": StageInputs(upstream={"x": record}, upstream_parallelism={"x": 6})}
    decision = decide_region(plan, plan.stages["b"].region, inputs, configs(plan), NO_FLOOR)
    assert (decision.traces["b"].decided_parallelism, decision.traces["b"].parallelism) == (6, 6)
    assert decision.traces["b"].rule == "forward edge: same as 'a'"


def test_forward_consumer_clamps_a_producers_parallelism_above_its_max() -> None:
    # The producer ran under other settings (an earlier run, another connection) with 50 tasks.
    plan = plan_stages([S("a"), S("b", {"x": {"upstream": "a", **BLOCKING_FWD}}, max_parallelism=8)])
    record = OutputRecord("a", "/out/a", "parquet", [64 * MiB] * 50, 10, 1)
    inputs = {"b": StageInputs(upstream={"x": record}, upstream_parallelism={"x": 50})}
    decision = decide_region(plan, plan.stages["b"].region, inputs, configs(plan), NO_FLOOR)
    trace = decision.traces["b"]
    assert (trace.decided_parallelism, trace.parallelism) == (8, 8)
    assert trace.rule == "forward edge: same as 'a'; 50 clamped to the forward group's bounds [1, 8]"


def test_run_time_bounds_that_cannot_all_hold_name_the_stages() -> None:
    # Parse time passes (a [10, 20] and b [?, ?] overlap as declared), but the connection's max 5
    # becomes b's: no parallelism is both >= 10 and <= 5.
    plan = plan_stages([S("a", min_parallelism=10, max_parallelism=20), S("b", {"x": {"upstream": "a", **FWD}})])
    with pytest.raises(ValueError, match="stage 'a' has min_parallelism 10 and stage 'b' has max_parallelism 5"):
        decide_region(plan, "region-1", {"a": source(50)}, configs(plan, max_parallelism=5), NO_FLOOR)


def test_group_bounds_without_a_power_of_two_name_the_group() -> None:
    plan = plan_stages([S("a", min_parallelism=5), S("b", {"x": {"upstream": "a", **FWD}}, max_parallelism=7)])
    with pytest.raises(ValueError, match=r"forward group \['a', 'b'\] \(bounds \[5, 7\]\): normalize='power_of_two'"):
        decide_region(plan, "region-1", {"a": source(50)}, configs(plan, normalize="power_of_two"), NO_FLOOR)


def test_a_fixed_group_needs_no_power_of_two_between_its_bounds() -> None:
    # Bounds [5, 7] hold no power of two, but nothing is decided: the fixed 6 (within them) runs.
    plan = plan_stages(
        [S("a", parallelism=6, min_parallelism=5), S("b", {"x": {"upstream": "a", **FWD}}, max_parallelism=7)]
    )
    decision = decide_region(plan, "region-1", {"a": source(50)}, configs(plan, normalize="power_of_two"), NO_FLOOR)
    assert {n: t.parallelism for n, t in decision.traces.items()} == {"a": 6, "b": 6}
