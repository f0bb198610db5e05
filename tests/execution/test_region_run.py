"""Run-time region decisions (pure): sizes from upstream records, forward edges, in-memory estimates."""

from __future__ import annotations

import re
from typing import Any

import pytest

from airflow_provider_finegrained.contract import OutputRecord
from airflow_provider_finegrained.execution.decision import ExternalSizes, StageInputs, decide_region
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
    assert decision.in_region_consumers["join"] == ("order",)
    assert decision.outside_consumers["join"] == ()


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


FILES_640 = [64 * MiB] * 10
# The file scans follow the bytes on disk; a learned work factor corrects only the shuffle partitions.
# (case, work, files read, stage config, expected decided, shuffle partitions, scan tasks, maxPartitionBytes)
# Local, 2 slots, memory factor 0.01 (no memory floor); by hand:
SIDE_CASES = [
    # 640 MiB x 0.0156 = 10 MiB: 1 partition; the scan: 640 / 64 = 10 splits of 64 MiB.
    ("factor-below-1", 0.0156, FILES_640, CONFIG, 1, 1, 10, 64 * MiB),
    # 150 MiB x 3.1 = 465 MiB: 8 partitions; the scan: 150 / 64 = 2.3 -> 3 -> 4 (even waves), an upper bound:
    # the balance reads the file in one wave of 2 tasks of 75 MiB (cost 77 MiB against 4 x 37.5: 79 MiB).
    ("factor-above-1", 3.1, [150 * MiB], CONFIG, 8, 8, 4, 150 * MiB // 2),
    # Nothing read: both sides at min_parallelism, the split at its 1 MiB floor.
    ("zero-bytes", 2.0, [0], CONFIG, 1, 1, 1, MiB),
    # min 4 is above the corrected 1: the shuffle stops at 4; the scan's 10 is within the bounds.
    ("corrected-below-min", 0.0156, FILES_640, ParallelismConfig(avg_bytes_per_task="64m", min_parallelism=4), 4, 4,
     10, 64 * MiB),
    # max 4 is below the bytes on disk: the scan obeys it too (4 splits of 160 MiB).
    ("scan-above-max", 0.0156, FILES_640, ParallelismConfig(avg_bytes_per_task="64m", max_parallelism=4), 1, 1, 4,
     160 * MiB),
]  # fmt: skip


@pytest.mark.parametrize(
    ("work", "files", "config", "decided", "shuffle", "scan", "split"),
    [c[1:] for c in SIDE_CASES],
    ids=[c[0] for c in SIDE_CASES],
)
def test_a_learned_factor_corrects_the_shuffle_and_leaves_the_scan_to_bytes_on_disk(
    work: float, files: list[int], config: ParallelismConfig, decided: int, shuffle: int, scan: int, split: int
) -> None:
    plan = plan_stages([StageSpec.build("source"), StageSpec.build("join", {"rows": "source"})])
    region = plan.stages["join"].region
    record = OutputRecord("source", "/x", "parquet", files, 10, len(files))
    learned = {"join": LearnedExpansion(work=work, runs=3, memory=0.01)}
    decision = decide_region(
        plan, region, {"join": StageInputs(upstream={"rows": record})}, lambda _: config, LOCAL, learned
    )
    sized, trace = decision.sizing.stages["join"], decision.traces["join"]
    assert trace.decided_parallelism == decided and "learned expansion" in trace.rule
    assert (sized.parallelism, sized.scan_tasks, sized.max_partition_bytes) == (shuffle, scan, split)
    conf = sized.session_conf()
    assert (conf["spark.sql.shuffle.partitions"], conf["spark.sql.files.maxPartitionBytes"]) == (
        str(shuffle),
        str(split),
    )
    scan_notes = [n for n in trace.sizing_notes if n.startswith("scan split follows the bytes on disk")]
    assert len(scan_notes) == (1 if scan != shuffle else 0)


def test_without_a_learned_factor_scan_and_shuffle_agree() -> None:
    plan = plan_stages([StageSpec.build("source"), StageSpec.build("join", {"rows": "source"})])
    record = OutputRecord("source", "/x", "parquet", FILES_640, 10, 10)
    decision = decide_region(
        plan, plan.stages["join"].region, {"join": StageInputs(upstream={"rows": record})}, lambda _: CONFIG, LOCAL
    )
    sized = decision.sizing.stages["join"]
    assert (sized.parallelism, sized.scan_tasks, sized.max_partition_bytes) == (10, 10, 64 * MiB)


def test_a_fixed_parallelism_sets_both_sides_whatever_was_learned() -> None:
    plan = plan_stages([StageSpec.build("source"), StageSpec.build("join", {"rows": "source"}, parallelism=3)])
    record = OutputRecord("source", "/x", "parquet", FILES_640, 10, 10)
    learned = {"join": LearnedExpansion(work=0.0156, runs=3, memory=0.01)}
    decision = decide_region(
        plan, plan.stages["join"].region, {"join": StageInputs(upstream={"rows": record})}, lambda _: CONFIG, LOCAL,
        learned,
    )  # fmt: skip
    sized, trace = decision.sizing.stages["join"], decision.traces["join"]
    assert trace.rule == "fixed parallelism (stage or its forward group)"
    # 3 on 2 slots stays (fixed); 640 MiB / 3 = 213.3 MiB splits.
    assert (sized.parallelism, sized.scan_tasks, sized.max_partition_bytes) == (3, 3, -(-640 * MiB // 3))


def _forward_plan(order_max: int = 128) -> Any:
    return plan_stages(
        [
            StageSpec.build("source"),
            StageSpec.build("join", {"rows": "source"}),
            StageSpec.build(
                "order",
                {"joined": {"upstream": "join", "mode": "pipelined", "distribution": "forward"}},
                max_parallelism=order_max,
            ),
        ]
    )


@pytest.mark.parametrize(
    ("order_max", "shuffle", "scan", "order_split"),
    [
        # join: 640 MiB x 0.0156 -> 1 partition, 10 scan splits; order follows both (its 640 MiB estimate / 10).
        pytest.param(128, 1, 10, 64 * MiB, id="follower-takes-both-counts"),
        # order's max 2 bounds the group: the scan's 10 becomes 2 for both (640 / 2 = 320 MiB splits).
        pytest.param(2, 1, 2, 320 * MiB, id="group-max-bounds-the-scan"),
    ],
)
def test_a_forward_group_follower_takes_its_deciders_shuffle_and_scan_counts(
    order_max: int, shuffle: int, scan: int, order_split: int
) -> None:
    plan = _forward_plan(order_max)
    record = OutputRecord("source", "/x", "parquet", FILES_640, 10, 10)
    learned = {"join": LearnedExpansion(work=0.0156, runs=3, memory=0.01)}

    def config_for(stage: str) -> ParallelismConfig:
        return ParallelismConfig(avg_bytes_per_task="64m", max_parallelism=order_max if stage == "order" else 128)

    decision = decide_region(
        plan, plan.stages["join"].region, {"join": StageInputs(upstream={"rows": record})}, config_for, LOCAL, learned
    )
    join, order = decision.sizing.stages["join"], decision.sizing.stages["order"]
    assert (join.parallelism, join.scan_tasks) == (shuffle, scan)
    assert (order.parallelism, order.scan_tasks, order.max_partition_bytes) == (shuffle, scan, order_split)
    assert decision.traces["order"].rule == "forward edge: same as 'join'"


def test_a_forward_group_whose_min_is_above_its_max_is_refused_with_both_stages_named() -> None:
    plan = _forward_plan()
    record = OutputRecord("source", "/x", "parquet", FILES_640, 10, 10)

    def config_for(stage: str) -> ParallelismConfig:
        if stage == "join":
            return ParallelismConfig(avg_bytes_per_task="64m", min_parallelism=8)
        return ParallelismConfig(avg_bytes_per_task="64m", max_parallelism=4)

    message = (
        "forward group ['join', 'order'] must share one parallelism, but stage 'join' has min_parallelism 8 and "
        "stage 'order' has max_parallelism 4"
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        decide_region(
            plan, plan.stages["join"].region, {"join": StageInputs(upstream={"rows": record})}, config_for, LOCAL,
            {"join": LearnedExpansion(work=0.0156, runs=3)},
        )  # fmt: skip


def test_a_scan_of_external_files_uses_their_measured_row_groups() -> None:
    # TPC-H SF 0.01's lineitem: one file of 1,927,111 bytes written as one row group of 1,920,431 bytes.
    # 1.84 MiB / 1 MiB per task = 2 tasks; assuming the producers' 1 MiB row groups the balance predicts
    # two tasks of data; read from the footer, a split below the file only adds an empty task: one task.
    config = ParallelismConfig(avg_bytes_per_task="1m")
    lineitem = ExternalSizes("/data/t", "parquet", [1_927_111], row_group_bytes=1_920_431)

    def balance(plan: Any, inputs: StageInputs) -> Any:
        region = plan.stages["scan"].region
        decision = decide_region(plan, region, {"scan": inputs}, lambda _: config, LOCAL)
        return decision.sizing.stages["scan"].balance

    alone = plan_stages([StageSpec.build("scan")])
    assumed = balance(alone, StageInputs(external={"t": ExternalSizes("/data/t", "parquet", [1_927_111])}))
    measured = balance(alone, StageInputs(external={"t": lineitem}))
    assert (assumed.row_group_bytes, assumed.task_bytes) == (MiB, (MiB, 1_927_111 - MiB))
    assert (measured.row_group_bytes, measured.task_bytes) == (1_920_431, (1_927_111,))
    assert "read from the files' footers" in measured.why
    # A broadcast side is not scanned into tasks: its unread footer changes nothing.
    dim = ExternalSizes("/data/dim", "parquet", [4096])
    with_dim = balance(alone, StageInputs(external={"t": lineitem, "d": dim}, external_broadcast=frozenset({"d"})))
    assert (with_dim.row_group_bytes, with_dim.task_bytes) == (1_920_431, (1_927_111,))
    # A committed upstream output's row groups are its producer's: a stage that also scans one keeps the
    # producers' size for all its files.
    after = plan_stages([StageSpec.build("source"), StageSpec.build("scan", {"rows": "source"})])
    record = OutputRecord("source", "/x", "parquet", [1_927_111], 10, 1)
    mixed = balance(after, StageInputs(upstream={"rows": record}, external={"t": lineitem}))
    assert mixed.row_group_bytes != 1_920_431
