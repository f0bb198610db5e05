"""``finegrained report``'s table from the stages' XCom values: the learned factor beside the rule."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_finegrained.cli.report import format_report, learned_text


@pytest.mark.parametrize(
    ("trace", "text"),
    [
        ({"learned": {"work": 3.14159, "runs": 5, "memory": 2.0}}, "work 3.14, memory 2 (5 runs)"),
        ({"learned": {"work": 0.31, "runs": 3, "memory": None}}, "work 0.31 (3 runs)"),
        ({"learned": None}, "-"),
        ({}, "-"),
    ],
)
def test_learned_text(trace: dict[str, Any], text: str) -> None:
    assert learned_text(trace) == text


def test_the_report_shows_the_learned_factor_beside_the_rule() -> None:
    trace = {
        "region": "region-2",
        "consumed_bytes": {"orders": 2048},
        "decided_parallelism": 3,
        "rule": "bytes x learned expansion 0.31 (5 runs) / avg_bytes_per_task",
        "learned": {"work": 0.31, "runs": 5, "memory": 2.4},
        "parallelism": 4,
        "waves": 2,
        "executors": 1,
        "executor_cores": 2,
        "executor_memory": 2**31,
        "memory_fraction": 1.0,
    }
    text = format_report("tpch", "run-1", {"q3_join": {"trace": trace, "output": {"total_bytes": 1024}}})
    header, _, row = text.splitlines()[1:]
    assert header.split() == [
        "stage", "region", "input", "decided", "rule", "learned", "planned", "executors", "memory", "output"
    ]  # fmt: skip
    assert "bytes x learned expansion 0.31 (5 runs) / avg_bytes_per_task  work 0.31, memory 2.4 (5 runs)" in row
    assert row.startswith("q3_join  region-2  2.0 KiB") and row.endswith("1.0 KiB")
