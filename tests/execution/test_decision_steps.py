"""The decision's pure steps, each with a table of cases worked out by hand (V = avg_bytes_per_task = 64 MiB).

FLIP-187's formula: ``p = ceil(non_broadcast / (V - broadcast))`` (broadcast capped at 0.5 V), clamped to
[min, max]; a source with nothing consumed takes ``default_source_parallelism``, else ``max_parallelism``.
A forward group's bounds are the highest min and the lowest max of its members (one parallelism serves all).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import FrozenInstanceError
from typing import Any

import pytest

from airflow_provider_finegrained.contract import OutputRecord
from airflow_provider_finegrained.execution.decision import (
    DecisionSettings,
    ExternalSizes,
    StageInputs,
    align_followers,
    consumption,
    decide_region,
    decide_stage,
    resolve_groups,
)
from airflow_provider_finegrained.planning import (
    ClusterProfile,
    DagPlan,
    LearnedExpansion,
    ParallelismConfig,
    StageSpec,
    plan_stages,
    size_region,
)

MiB = 2**20
GiB = 2**30
S = StageSpec.build
FWD = {"mode": "pipelined", "distribution": "forward"}
BLOCKING_FWD = {"mode": "blocking", "distribution": "forward"}
V = ParallelismConfig(avg_bytes_per_task="64m")
NO_FLOOR = ClusterProfile(
    total_cores=4, total_memory=64 * GiB, executor_memory=16 * GiB, local=True, memory_expansion=0.01
)


def configs(plan: DagPlan) -> Any:
    def config_for(stage: str) -> ParallelismConfig:
        declared = plan.stages[stage]
        bounds = {
            k: v
            for k, v in (("min_parallelism", declared.min_parallelism), ("max_parallelism", declared.max_parallelism))
            if v
        }
        return ParallelismConfig(avg_bytes_per_task="64m", **bounds)

    return config_for


def files(*mib: int) -> StageInputs:
    return StageInputs(external={"t": ExternalSizes("/data/t", "parquet", [m * MiB for m in mib])})


# ---------------------------------------------------------------- 1. forward groups, before any stage

# (specs, region of, ran_with, expected per group of the region's first stage: bounds, inherited, first)
GROUP_CASES = [
    pytest.param(
        [S("a")], "a", {}, (None, None, "a"), id="a-group-of-one-has-no-bounds-and-decides-itself"
    ),
    pytest.param(
        [S("a", max_parallelism=64), S("b", {"x": {"upstream": "a", **FWD}}, min_parallelism=4, max_parallelism=32)],
        "a", {}, ((4, 32), None, "a"), id="bounds-are-the-highest-min-and-lowest-max",
    ),
    pytest.param(
        [S("a", parallelism=6), S("b", {"x": {"upstream": "a", **FWD}})],
        "a", {}, ((1, 128), None, None), id="a-fixed-group-has-no-member-to-decide",
    ),
    # c and y in one group over two regions; c ran with 12, y's region is bounded by y's max 6: 12 -> 6.
    pytest.param(
        [S("c"), S("y", max_parallelism=6), S("z", {"m": {"upstream": "c", **BLOCKING_FWD}, "n": {"upstream": "y", **BLOCKING_FWD}})],  # noqa: E501
        "y", {"c": 12}, ((1, 6), ("c", 6, 12), "y"), id="inherited-from-a-region-that-ran-clamped-to-the-bounds",
    ),
    pytest.param(
        [S("c"), S("y"), S("z", {"m": {"upstream": "c", **BLOCKING_FWD}, "n": {"upstream": "y", **BLOCKING_FWD}})],
        "y", {"c": 3}, ((1, 128), ("c", 3, None), "y"), id="inherited-within-the-bounds-as-it-ran",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("specs", "stage", "ran_with", "expected"), GROUP_CASES)
def test_forward_groups_are_resolved_before_any_stage_is_decided(
    specs: list[StageSpec], stage: str, ran_with: Mapping[str, int], expected: tuple[Any, Any, str | None]
) -> None:
    plan = plan_stages(specs)
    groups = resolve_groups(plan, plan.stages[stage].region, {}, configs(plan), ran_with)
    group = groups[plan.stages[stage].forward_group]
    bounds = None if group.bounds is None else (group.bounds.low, group.bounds.high)
    inherited = None if group.inherited is None else tuple(vars(group.inherited).values())
    assert (bounds, inherited, group.first) == expected


# ---------------------------------------------------------------- 2. the per-stage decider

# (stage's input MiB, broadcast MiB, learned work factor, config, expected parallelism, rule, scan parallelism)
DECIDER_CASES = [
    pytest.param([320], 0, None, V, 5, "bytes / avg_bytes_per_task", None, id="320/64=5"),
    pytest.param([100, 100, 56], 0, None, V, 4, "bytes / avg_bytes_per_task", None, id="256/64=4"),
    # 300 / (64 - 5) = 5.08 -> 6
    pytest.param([300], 5, None, V, 6, "bytes / avg_bytes_per_task", None, id="broadcast-counts-against-each-task"),
    # broadcast 40 > 0.5 x 64: capped at 32; 300 / 32 = 9.4 -> 10
    pytest.param([300], 40, None, V, 10, "bytes / avg_bytes_per_task", None, id="broadcast-capped-at-half"),
    pytest.param([0], 0, None, V, 1, "zero bytes: min_parallelism", None, id="zero-bytes"),
    pytest.param([], 0, None, V, 128, "source: max_parallelism (no default set)", None, id="source-without-inputs"),
    pytest.param([40 * 1024], 0, None, V, 128, "clamped to max_parallelism", None, id="40g-clamped"),
    # 320 / 64 = 5, nearest power of two 4
    pytest.param(
        [320], 0, None, ParallelismConfig(avg_bytes_per_task="64m", normalize="power_of_two"),
        4, "bytes / avg_bytes_per_task; normalized 5 to power of two 4", None, id="power-of-two",
    ),
    # 150 x 3.1 = 465 / 64 = 7.3 -> 8 for the shuffles; the scans follow the bytes on disk: 150 / 64 -> 3
    pytest.param(
        [150], 0, 3.1, V, 8, "bytes x learned expansion 3.1 (3 runs) / avg_bytes_per_task", 3, id="learned-work-factor",
    ),
]  # fmt: skip


@pytest.mark.parametrize(("mib", "broadcast", "work", "config", "parallelism", "rule", "scan"), DECIDER_CASES)
def test_the_decider_gives_parallelism_and_rule_from_the_bytes(
    mib: list[int],
    broadcast: int,
    work: float | None,
    config: ParallelismConfig,
    parallelism: int,
    rule: str,
    scan: int | None,
) -> None:
    plan = plan_stages([S("s")])
    external = {"t": ExternalSizes("/t", "parquet", [m * MiB for m in mib])} if mib else {}
    if broadcast:
        external["dim"] = ExternalSizes("/dim", "parquet", [broadcast * MiB])
    inputs = StageInputs(external=external, external_broadcast=frozenset({"dim"}) if broadcast else frozenset())
    used = consumption(plan, "s", inputs, frozenset({"s"}), {})
    group = resolve_groups(plan, plan.stages["s"].region, {"s": inputs}, lambda _: config, {})[
        plan.stages["s"].forward_group
    ]
    expansion = LearnedExpansion(work, 3) if work else None
    choice = decide_stage(plan, "s", used, config, group, expansion)
    assert (choice.parallelism, choice.rule, choice.scan_parallelism, choice.leads) == (parallelism, rule, scan, True)


def test_the_decider_of_a_follower_takes_its_leaders_choice_and_a_fixed_stage_its_own() -> None:
    plan = plan_stages([S("a"), S("b", {"x": {"upstream": "a", **FWD}}), S("f", parallelism=3)])
    region = plan.stages["a"].region
    groups = resolve_groups(plan, region, {"a": files(320)}, lambda _: V, {})
    lead = decide_stage(
        plan, "a", consumption(plan, "a", files(320), {"a", "b"}, {}), V, groups[plan.stages["a"].forward_group]
    )
    used = consumption(plan, "b", StageInputs(), {"a", "b"}, {"a": 320 * MiB})
    follower = decide_stage(plan, "b", used, V, groups[plan.stages["b"].forward_group], leader=lead)
    assert (lead.parallelism, follower.parallelism, follower.rule, follower.follows) == (
        5,
        5,
        "forward edge: same as 'a'",
        "a",
    )
    # b's own bytes are estimated from what a consumed: 320 MiB (5 tasks' worth, as a's)
    assert follower.consumption.consumed_bytes == {"x": 320 * MiB}
    f_region = plan.stages["f"].region
    f_group = resolve_groups(plan, f_region, {}, lambda _: V, {})[plan.stages["f"].forward_group]
    fixed = decide_stage(plan, "f", consumption(plan, "f", files(640), {"f"}, {}), V, f_group)
    assert (fixed.parallelism, fixed.rule, fixed.leads) == (3, "fixed parallelism (stage or its forward group)", False)


# ---------------------------------------------------------------- 3. followers aligned as a new value

# (a's MiB, b's max, expected (a, b) sized parallelism, how b's note begins): 4 slots; a leads, b follows a.
ALIGN_CASES = [
    # a: 448 / 64 = 7 -> 8, the nearer multiple of 4 slots (1 away, 4 is 3 away); b follows: 8, noted
    pytest.param(448, None, (8, 8), "forward group: 8 like 'a' (7 -> 8 for even waves over 4 slots",
                 id="even-waves-moved"),
    # a: 256 / 64 = 4, one full wave: nothing moves, no note
    pytest.param(256, None, (4, 4), None, id="nothing-moved"),
    # group max 6 (b's): a 11 -> 6 clamped; 6 on 4 slots: 8 > 6, so down to 4; b follows 4
    pytest.param(704, 6, (4, 4), "forward group: 4 like 'a' (6 -> 4 for even waves over 4 slots",
                 id="within-the-groups-max"),
]  # fmt: skip


@pytest.mark.parametrize(("mib", "b_max", "expected", "note"), ALIGN_CASES)
def test_followers_are_aligned_with_their_leader_as_a_new_value(
    mib: int, b_max: int | None, expected: tuple[int, int], note: str | None
) -> None:
    plan = plan_stages(
        [S("a"), S("b", {"x": {"upstream": "a", **FWD}}, **({"max_parallelism": b_max} if b_max else {}))]
    )
    region = plan.stages["a"].region
    decision = decide_region(plan, region, {"a": files(mib)}, configs(plan), NO_FLOOR)
    assert (decision.stages["a"].parallelism, decision.stages["b"].parallelism) == expected
    notes = [n for n in decision.stages["b"].trace.sizing_notes if n.startswith("forward group")]
    assert [n[: len(note)] for n in notes] == ([note] if note else [])
    # align_followers gives a new sizing; the one it was given is left as it was
    from airflow_provider_finegrained.execution.decision.region import decide_stages

    choices = decide_stages(
        plan,
        plan.regions[region],
        {"a": files(mib)},
        configs(plan),
        resolve_groups(plan, region, {"a": files(mib)}, configs(plan), {}),
        {},
    )
    sized = size_region([c.demand(plan.stages[c.stage]) for c in choices], NO_FLOOR)
    before = dict(sized.stages)
    aligned = align_followers(sized, choices)
    assert aligned is not sized and dict(sized.stages) == before
    assert aligned.stages["b"].parallelism == expected[1]


# ---------------------------------------------------------------- 4. the value: session settings, immutability

LOCAL = ClusterProfile(total_cores=2, total_memory="6g", executor_memory="4g", local=True)


@pytest.mark.parametrize(
    ("aqe", "own", "expected"),
    [
        # 1 GiB / 64 MiB = 16; memory floor: 1 GiB x 3 / ((4096 - 300) MiB x 0.6 / 2 slots) = 2.7 -> 3
        (True, {}, {"spark.sql.shuffle.partitions": "16", "spark.sql.adaptive.enabled": "true",
                    "spark.sql.adaptive.coalescePartitions.minPartitionNum": "3"}),
        (False, {}, {"spark.sql.shuffle.partitions": "16", "spark.sql.adaptive.enabled": "false"}),
        # the stage's own spark.sql.* win; its other keys are the application's
        (True, {"spark.sql.shuffle.partitions": "7", "spark.eventLog.enabled": "true"},
         {"spark.sql.shuffle.partitions": "7"}),
    ],
)  # fmt: skip
def test_a_stages_session_settings_are_in_its_decision(
    aqe: bool, own: dict[str, str], expected: dict[str, str]
) -> None:
    plan = plan_stages([S("s")])
    settings = DecisionSettings(adaptive_query_execution=aqe, stage_spark_conf={"s": own})
    decision = decide_region(plan, plan.stages["s"].region, {"s": files(1024)}, lambda _: V, LOCAL, settings=settings)
    session = decision.stages["s"].session_conf
    assert {k: session.get(k) for k in expected} == expected
    assert "spark.eventLog.enabled" not in session
    assert decision.stages["s"].trace.spark_conf == {}  # the trace's Spark settings are the run's to state


def test_the_decision_is_frozen() -> None:
    plan = plan_stages([S("s")])
    decision = decide_region(plan, plan.stages["s"].region, {"s": files(64)}, lambda _: V, LOCAL)
    with pytest.raises(FrozenInstanceError):
        decision.sizing = decision.sizing  # type: ignore[misc]
    with pytest.raises(FrozenInstanceError):
        decision.stages["s"].parallelism = 3  # type: ignore[misc]
    assert decision.traces is not decision.traces  # a new dict each time: nothing shared to mutate


def test_an_upstream_record_round_trips_for_explain() -> None:
    inputs = StageInputs(
        upstream={"rows": OutputRecord("a", "/o/a", "parquet", [3, 4], 7, 2)},
        external={"t": ExternalSizes("/t", "csv", [5], 2)},
        external_broadcast=frozenset({"t"}),
        upstream_parallelism={"rows": 2},
    )
    again = StageInputs.from_record(inputs.to_record())
    assert again.to_record() == inputs.to_record()
    assert again.upstream["rows"].partition_bytes == [3, 4] and again.external_broadcast == {"t"}
