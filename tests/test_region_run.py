"""Run-time region decisions (pure): sizes from upstream records, forward edges, in-memory estimates."""

from __future__ import annotations

import re
from typing import Any

import pytest

from airflow_provider_finegrained.contract import OutputRecord
from airflow_provider_finegrained.execution.region_run import ExternalSizes, StageInputs, decide_region
from airflow_provider_finegrained.planning import (
    ClusterProfile,
    LearnedExpansion,
    ParallelismConfig,
    StageSpec,
    plan_stages,
)

MiB = 2**20
LOCAL = ClusterProfile(total_cores=2, total_memory="6g", executor_memory="4g", local=True)
CONFIG = ParallelismConfig(avg_bytes_per_task="64m")


def test_forward_consumer_in_a_region_keeps_the_producers_final_parallelism() -> None:
    plan = plan_stages(
        [
            StageSpec.build("source"),
            StageSpec.build("join", {"rows": "source"}),
            StageSpec.build("order", {"joined": {"upstream": "join", "mode": "pipelined", "distribution": "forward"}}),
        ]
    )
    region = plan.stages["join"].region
    record = OutputRecord("source", "/x", "parquet", [150 * MiB], 10, 1)
    decision = decide_region(plan, region, {"join": StageInputs(upstream={"rows": record})}, lambda _: CONFIG, LOCAL)
    # 150 MiB / 64 MiB = 3 tasks; on 2 slots the tie goes up to 4 (two full waves).
    assert decision.traces["join"].decided_parallelism == 3
    assert decision.sizing.stages["join"].parallelism == 4
    assert decision.sizing.stages["order"].parallelism == 4
    assert decision.traces["order"].rule == "forward edge: same as 'join'"
    # The in-memory consumer's input is estimated from what its producer consumed.
    assert decision.traces["order"].consumed_bytes == {"joined": 150 * MiB}
    assert decision.in_region_consumers["join"] == ["order"]
    assert decision.outside_consumers["join"] == []


def test_source_sized_from_its_files_with_a_broadcast_side() -> None:
    plan = plan_stages([StageSpec.build("scan")])
    files = ExternalSizes("/data/t", "parquet", [100 * MiB, 100 * MiB, 56 * MiB])
    small = ExternalSizes("/data/dim", "parquet", [8 * MiB])
    inputs = {"scan": StageInputs(external={"t": files, "dim": small}, external_broadcast=frozenset({"dim"}))}
    decision = decide_region(plan, "region-1", inputs, lambda _: CONFIG, LOCAL)
    trace = decision.traces["scan"]
    # 256 MiB / (64 MiB - 8 MiB broadcast) = 4.57 -> 5; on 2 slots 5 is a tie between 4 and 6: up to 6.
    assert (trace.decided_parallelism, trace.parallelism) == (5, 6)
    assert trace.broadcast_inputs == ["dim"]
    assert trace.consumed_bytes == {"t": 256 * MiB, "dim": 8 * MiB}


# (work factor, memory factor, bytes consumed, expected decided parallelism, expected rule), by hand:
# p = ceil(bytes x work / 64 MiB), clamped to [1, 128].
LEARNED_CASES = [
    (1.0, None, 150 * MiB, 3, "bytes x learned expansion 1 (3 runs) / avg_bytes_per_task"),
    (3.1, None, 150 * MiB, 8, "bytes x learned expansion 3.1 (3 runs) / avg_bytes_per_task"),  # 465 MiB / 64 = 7.27
    (0.25, None, 150 * MiB, 1, "bytes x learned expansion 0.25 (3 runs) / avg_bytes_per_task"),  # 37.5 MiB
    (0.5, 2.0, 128 * MiB, 1, "bytes x learned expansion 0.5 (3 runs) / avg_bytes_per_task"),  # exactly 64 MiB
    (
        100.0,
        None,
        150 * MiB,
        128,
        "clamped to max_parallelism (bytes x learned expansion 100 (3 runs) / avg_bytes_per_task)",
    ),
    (2.0, None, 0, 1, "zero bytes: min_parallelism (bytes x learned expansion 2 (3 runs) / avg_bytes_per_task)"),
]


@pytest.mark.parametrize(("work", "memory", "size", "expected", "rule"), LEARNED_CASES)
def test_a_learned_expansion_scales_the_bytes_a_stage_decides_from(
    work: float, memory: float | None, size: int, expected: int, rule: str
) -> None:
    plan = plan_stages([StageSpec.build("source"), StageSpec.build("join", {"rows": "source"})])
    region = plan.stages["join"].region
    record = OutputRecord("source", "/x", "parquet", [size], 10, 1)
    learned = {"join": LearnedExpansion(work=work, runs=3, memory=memory)}
    decision = decide_region(
        plan, region, {"join": StageInputs(upstream={"rows": record})}, lambda _: CONFIG, LOCAL, learned
    )
    trace = decision.traces["join"]
    assert (trace.decided_parallelism, trace.rule) == (expected, rule)
    assert trace.learned == {"work": work, "runs": 3, "memory": memory}
    assert trace.consumed_bytes == {"rows": size}  # the trace keeps the measured bytes


def test_a_learned_memory_expansion_moves_the_memory_floor() -> None:
    plan = plan_stages([StageSpec.build("source"), StageSpec.build("join", {"rows": "source"})])
    region = plan.stages["join"].region
    record = OutputRecord("source", "/x", "parquet", [1024 * MiB], 10, 1)
    # A 4 GiB local driver, 2 slots: (4096 - 300) MiB x 0.6 / 2 = 1138.8 MiB per task.
    # Profile's 3.0: ceil(3072 / 1138.8) = 3; learned 9.0: ceil(9216 / 1138.8) = 9 (-> 10, even waves).
    config = ParallelismConfig(avg_bytes_per_task="1g")
    inputs = {"join": StageInputs(upstream={"rows": record})}
    base = decide_region(plan, region, inputs, lambda _: config, LOCAL)
    learned = {"join": LearnedExpansion(work=1.0, runs=4, memory=9.0)}
    more = decide_region(plan, region, inputs, lambda _: config, LOCAL, learned)
    assert (base.sizing.stages["join"].memory_floor, base.sizing.stages["join"].parallelism) == (3, 4)
    assert (more.sizing.stages["join"].memory_floor, more.sizing.stages["join"].parallelism) == (9, 10)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"work": 0, "runs": 3}, "learned work expansion must be a finite number > 0, got 0"),
        ({"work": float("nan"), "runs": 3}, "learned work expansion must be a finite number > 0, got nan"),
        ({"work": 1.0, "runs": 0}, "learned expansion needs runs >= 1, got 0"),
        ({"work": 1.0, "runs": 2, "memory": -1.0}, "learned memory expansion must be a finite number > 0, got -1.0"),
    ],
)
def test_a_learned_expansion_refuses_nonsense(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        LearnedExpansion(**kwargs)
