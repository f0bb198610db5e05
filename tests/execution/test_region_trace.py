"""Each stage's trace is built once, from the decided trace and the run's frozen results."""

from __future__ import annotations

import copy
from datetime import datetime

import pytest

from airflow_provider_finegrained.contract import StageTrace
from airflow_provider_finegrained.execution.region_trace import CapacityRecord, RegionRunFacts, stage_trace
from airflow_provider_finegrained.launchers.base import LaunchResult
from airflow_provider_finegrained.runtime.job import StageStatus

DECIDED = StageTrace(
    stage="b",
    region="r1",
    slot_sharing_group="default",
    region_leader="a",
    consumed_bytes={"a": 1024},
    config={"min_parallelism": 1},
    decided_parallelism=8,
    parallelism=8,
    sizing_notes=["even waves"],
    waves=2,
)
LAUNCHED = datetime.fromisoformat("2026-11-23T10:00:00+00:00").timestamp()
STATUS = StageStatus(
    "b",
    "success",
    output={"partition_bytes": [10, 20], "rows": 3},
    started_at="2026-11-23T10:00:05+00:00",
    ended_at="2026-11-23T10:00:07.5+00:00",
    ready_at="2026-11-23T10:00:04+00:00",
    application_id="local-1700000000000",
    spark_tasks={"total_tasks": 8},
)


def facts(
    capacity: CapacityRecord, launch: LaunchResult | None = None, carrier: dict[str, str] | None = None
) -> RegionRunFacts:
    return RegionRunFacts(
        carrier=carrier or {"mode": "cold", "reason": "warm_pool is 'off'"},
        capacity=capacity,
        timings={"inputs_s": 0.5, "decide_s": 0.1, "submit_s": 9.0},
        launched_at=LAUNCHED,
        launch=launch or LaunchResult(0, None, 9.0),
    )


GRANT = {"outcome": "as_requested", "message": "2 executor(s) fit", "executors": 2, "source": "declared"}


@pytest.mark.parametrize(
    ("capacity", "message"),
    [
        (CapacityRecord(GRANT), "2 executor(s) fit"),
        (
            CapacityRecord(GRANT, reduced_to_executors=1),
            "2 executor(s) fit; sized again on 1 executor(s), 2 wave(s) for this stage",
        ),
    ],
)
def test_capacity_message_per_stage(capacity: CapacityRecord, message: str) -> None:
    trace = stage_trace(DECIDED, facts(capacity), {}, STATUS, first=False)
    assert trace.capacity == {**GRANT, "message": message}


def test_the_trace_takes_the_status_launch_and_timings_without_touching_the_decided_one() -> None:
    before = copy.deepcopy(DECIDED)
    conf = {"spark.sql.shuffle.partitions": "8", "spark.authenticate.secret": "***"}
    trace = stage_trace(DECIDED, facts(CapacityRecord(GRANT)), conf, STATUS, first=True)
    assert before == DECIDED
    assert trace.consumed_bytes is not DECIDED.consumed_bytes and trace.sizing_notes is not DECIDED.sizing_notes
    assert (trace.output_bytes, trace.output_rows) == (30, 3)
    assert (trace.started_at, trace.ended_at) == (STATUS.started_at, STATUS.ended_at)
    assert trace.application_id == "local-1700000000000"  # from the status when the launch saw no id
    assert trace.spark_tasks == {"total_tasks": 8}
    assert trace.spark_conf == dict(sorted(conf.items()))
    assert trace.execution == {"mode": "cold", "reason": "warm_pool is 'off'"}
    assert trace.timings == {"inputs_s": 0.5, "decide_s": 0.1, "submit_s": 9.0, "spark_stage_s": 2.5, "start_s": 4.0}
    assert StageTrace.from_xcom(trace.to_xcom()) == trace


def test_only_the_first_stage_has_a_start_latency_and_the_launch_id_wins() -> None:
    trace = stage_trace(DECIDED, facts(CapacityRecord(GRANT), LaunchResult(0, "app-1", 9.0)), {}, STATUS, first=False)
    assert "start_s" not in trace.timings
    assert trace.application_id == "app-1"


def test_a_stage_without_a_status_keeps_the_decided_fields() -> None:
    trace = stage_trace(DECIDED, facts(CapacityRecord(GRANT)), {}, None, first=True)
    assert (trace.output_bytes, trace.output_rows, trace.started_at, trace.spark_tasks) == (None, None, None, None)
    assert trace.timings == {"inputs_s": 0.5, "decide_s": 0.1, "submit_s": 9.0}
    assert (trace.parallelism, trace.waves, trace.rule) == (8, 2, "")


def test_a_warm_stage_names_its_connect_session() -> None:
    launch = LaunchResult(0, "local-1", 1.0, sessions={"b": "fg_abc_b"})
    carrier = {"mode": "warm", "reason": "fits", "pool": "sc://127.0.0.1:15002"}
    trace = stage_trace(DECIDED, facts(CapacityRecord(GRANT), launch, carrier), {}, STATUS, first=False)
    assert trace.execution == {**carrier, "session": "fg_abc_b"}
