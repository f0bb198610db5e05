"""Region decisions read in the order regions run: each case worked out by hand (V = 64 MiB per task)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from airflow_provider_finegrained.contract import OutputRecord
from airflow_provider_finegrained.execution.region_run import (
    ExternalSizes,
    StageInputs,
    decide_region,
    forward_group_peers,
)
from airflow_provider_finegrained.planning import ClusterProfile, DagPlan, ParallelismConfig, StageSpec, plan_stages

MiB = 2**20
GiB = 2**30
S = StageSpec.build
BLOCKING_FWD = {"mode": "blocking", "distribution": "forward"}
# 4 slots in one local JVM; a tiny memory expansion keeps memory floors at 1.
NO_FLOOR = ClusterProfile(
    total_cores=4, total_memory=64 * GiB, executor_memory=16 * GiB, local=True, memory_expansion=0.01
)
CONFIG = ParallelismConfig(avg_bytes_per_task="64m")


def source(v_units: int) -> StageInputs:
    """A source reading ``v_units`` x 64 MiB of files (so it computes ``v_units`` tasks)."""
    return StageInputs(external={"t": ExternalSizes("/data/t", "parquet", [v_units * 64 * MiB])})


def run_in_order(plan: DagPlan, order: Sequence[str], sources: Mapping[str, int]) -> dict[str, tuple[int, int, str]]:
    """Decide the regions in ``order`` as the runner does: each later region reads what earlier ones ran
    with (a forward producer's trace by input, any other forward group member's trace by stage)."""
    ran: dict[str, int] = {}
    got: dict[str, tuple[int, int, str]] = {}
    for region in order:
        inputs: dict[str, StageInputs] = {}
        for name in plan.regions[region]:
            if name in sources:
                inputs[name] = source(sources[name])
                continue
            upstream = {
                e.input_name: OutputRecord(
                    e.producer, f"/out/{e.producer}", "parquet", [64 * MiB] * ran[e.producer], 1, 1
                )
                for e in plan.stages[name].inputs
            }
            by_input = {e.input_name: ran[e.producer] for e in plan.stages[name].inputs}
            inputs[name] = StageInputs(upstream=upstream, upstream_parallelism=by_input)
        peers = {peer: ran[peer] for peer in forward_group_peers(plan, region) if peer in ran}
        decision = decide_region(plan, region, inputs, lambda _: CONFIG, NO_FLOOR, ran_with=peers)
        for name, trace in decision.traces.items():
            assert trace.parallelism is not None
            ran[name] = trace.parallelism
            got[name] = (trace.decided_parallelism, trace.parallelism, trace.rule)
    return got


# a -> b and c -> b, both blocking forward: regions {a}, {c}, {b}, one forward group {a, c, b}.
# a reads 12 x V: 12 tasks, three full waves of 4; c reads 3 x V: 3 tasks, one wave.
TWO_REGIONS = [S("a"), S("c"), S("b", {"x": {"upstream": "a", **BLOCKING_FWD}, "y": {"upstream": "c", **BLOCKING_FWD}})]
CASES = [
    # a's region runs first and decides 12 for the group; c takes it instead of its own 3; b too.
    pytest.param(
        ["region-1", "region-2", "region-3"],
        {
            "a": (12, 12, "bytes / avg_bytes_per_task"),
            "c": (12, 12, "forward group: same as 'a'"),
            "b": (12, 12, "forward edge: same as 'a'"),
        },
        id="first-region-decides",
    ),
    # c's region runs first (nothing orders the two): its 3 is the group's, a takes it, b too (b's rule
    # names a, the first of its group that ran, with the same 3).
    pytest.param(
        ["region-2", "region-1", "region-3"],
        {
            "c": (3, 3, "bytes / avg_bytes_per_task"),
            "a": (3, 3, "forward group: same as 'c'"),
            "b": (3, 3, "forward edge: same as 'a'"),
        },
        id="other-region-decides",
    ),
]


@pytest.mark.parametrize(("order", "expected"), CASES)
def test_forward_group_fed_from_two_regions_is_decided_once(
    order: list[str], expected: dict[str, tuple[int, int, str]]
) -> None:
    plan = plan_stages(TWO_REGIONS)
    assert plan.regions == {"region-1": ("a",), "region-2": ("c",), "region-3": ("b",)}
    got = run_in_order(plan, order, {"a": 12, "c": 3})
    assert got == expected
    assert len({ran for _, ran, _ in got.values()}) == 1


def test_forward_group_peers_are_the_members_other_regions_hold() -> None:
    plan = plan_stages(TWO_REGIONS)
    assert [forward_group_peers(plan, r) for r in plan.regions] == [("c", "b"), ("a", "b"), ("a", "c")]
