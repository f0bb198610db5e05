"""Run-time region decisions (pure): sizes from upstream records, forward edges, in-memory estimates."""

from __future__ import annotations

from airflow_provider_finegrained.contract import OutputRecord
from airflow_provider_finegrained.execution.region_run import ExternalSizes, StageInputs, decide_region
from airflow_provider_finegrained.planning import ClusterProfile, ParallelismConfig, StageSpec, plan_stages

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
