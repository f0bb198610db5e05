"""View models from XCom dicts: rows for every stage, missing data shown as such, history points."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_finegrained.ui.model import (
    RunInput,
    duration_s,
    format_duration,
    history_view,
    run_view,
    stage_order,
    stage_row,
)
from tests.ui.plans import BROADCAST_FORWARD, SINGLE, trace


@pytest.mark.parametrize(
    ("consumed", "input_bytes", "input_text"),
    [
        ({}, 0, "0 B"),  # a source stage reads nothing upstream
        ({"a": 0}, 0, "0 B"),  # an upstream that committed an empty output
        ({"a": 1536}, 1536, "1.5 KiB"),
        ({"a": 1024**2, "b": 1024**2}, 2 * 1024**2, "2.0 MiB"),
    ],
)
def test_input_bytes_sum_every_upstream(consumed: dict[str, int], input_bytes: int, input_text: str) -> None:
    row = stage_row("s", None, trace("s", consumed, 3), None, "success")
    assert (row.input_bytes, row.input_text, row.inputs) == (input_bytes, input_text, consumed)


def test_a_full_row_reads_every_field() -> None:
    t = trace("s", {"a": 10}, 4, waves=2, parallelism=8, executors=2, executor_cores=4, memory_fraction=0.5)
    row = stage_row("s", None, t, {"total_bytes": 2048, "in_memory_only": False}, "success")
    assert row.decided_text == "4" and row.rule == "bytes / avg_bytes_per_task"
    assert row.planned_text == "8 tasks in 2 wave(s)"
    assert row.executors_text == "2 × 4 cores"
    assert row.memory_text == "2.0 GiB (+384.0 MiB)"
    assert row.fraction_text == "0.500"
    assert (row.capacity_outcome, row.capacity_message) == ("as_requested", "running as planned")
    assert (row.carrier, row.carrier_reason) == ("", "")  # a trace from before warm pools
    warm = stage_row("s", None, {**t, "execution": {"mode": "warm", "reason": "fits"}}, None, "success")
    assert (warm.carrier, warm.carrier_reason) == ("warm", "fits")
    assert row.output_text == "2.0 KiB"  # the output record wins over the trace's output_bytes
    assert row.duration_text == "12.5 s"
    assert row.application_id == "local-1"


@pytest.mark.parametrize(
    ("trace_value", "output", "state", "expected_state"),
    [
        (None, None, "failed", "failed"),
        (None, None, None, "no trace"),
        (None, None, "upstream_failed", "upstream_failed"),
    ],
)
def test_a_stage_without_trace_shows_dashes(
    trace_value: dict[str, Any] | None, output: dict[str, Any] | None, state: str | None, expected_state: str
) -> None:
    row = stage_row("s", {"region": "region-3", "slot_sharing_group": "g", "memory_fraction": 0.25}, None, None, state)
    assert row.state == expected_state and not row.has_trace
    assert (row.region, row.slot_sharing_group) == ("region-3", "g")
    texts = (row.input_text, row.decided_text, row.planned_text, row.executors_text, row.memory_text)
    assert texts == ("–",) * 5
    assert (row.output_text, row.duration_text, row.application_id) == ("–", "–", "")
    # The plan still knows the stage's memory fraction.
    assert row.fraction_text == "0.250"


def test_in_memory_handover_and_zero_overhead() -> None:
    row = stage_row("s", None, trace("s", {}, 1, memory_overhead=0), {"in_memory_only": True}, "success")
    assert row.output_text == "in memory"
    assert row.memory_text == "2.0 GiB"


def test_run_view_lists_plan_stages_in_region_order_and_unknown_ones_last() -> None:
    run = RunInput(
        run_id="r1",
        plan=BROADCAST_FORWARD,
        traces={"join": trace("join", {"dim": 5, "src": 7}, 2), "stray": trace("stray", {}, 1)},
        states={"dim": "success", "src": "success", "join": "success", "agg": "failed"},
    )
    view = run_view("d", run)
    assert [r.stage for r in view.rows] == ["dim", "src", "join", "agg", "stray"]
    by_stage = {r.stage: r for r in view.rows}
    assert by_stage["join"].input_bytes == 12
    assert by_stage["agg"].state == "failed" and by_stage["agg"].decided_parallelism is None
    data = view.to_json()
    assert data["plan"] == BROADCAST_FORWARD and [s["stage"] for s in data["stages"]][:2] == ["dim", "src"]


def test_run_view_without_plan_or_traces() -> None:
    view = run_view("d", RunInput(run_id="r"))
    assert view.rows == [] and view.plan is None


def test_stage_order() -> None:
    assert stage_order(SINGLE, ["b", "only", "a"]) == ["only", "a", "b"]
    assert stage_order(None, ["b", "a"]) == ["a", "b"]


def test_history_points_oldest_first_and_skip_stages_without_decision() -> None:
    newest = RunInput("r3", plan=SINGLE, traces={"only": trace("only", {"a": 3000}, 3)})
    middle = RunInput("r2", traces={})  # failed before any stage traced
    oldest = RunInput("r1", traces={"only": trace("only", {"a": 1000}, 1, ended_at=None)})
    view = history_view("d", [newest, middle, oldest])
    assert view.runs == ["r1", "r2", "r3"]
    points = view.stages["only"]
    assert [(p.run_id, p.input_bytes, p.decided_parallelism, p.duration_s) for p in points] == [
        ("r1", 1000, 1, None),
        ("r3", 3000, 3, 12.5),
    ]


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        ("2026-01-01T00:00:00+00:00", "2026-01-01T00:01:05+00:00", 65.0),
        ("2026-01-01T00:00:00+00:00", None, None),
        (None, "2026-01-01T00:00:00+00:00", None),
        ("not a time", "2026-01-01T00:00:00+00:00", None),
        # A clock that went backwards never gives a negative duration.
        ("2026-01-01T00:00:05+00:00", "2026-01-01T00:00:00+00:00", 0.0),
    ],
)
def test_duration(start: str | None, end: str | None, expected: float | None) -> None:
    assert duration_s(start, end) == expected


@pytest.mark.parametrize(
    ("seconds", "text"), [(None, "–"), (0.0, "0.0 s"), (4.25, "4.2 s"), (59.9, "59.9 s"), (125, "2 min 5 s")]
)
def test_format_duration(seconds: float | None, text: str) -> None:
    assert format_duration(seconds) == text
