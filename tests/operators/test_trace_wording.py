"""The task log's decision trace says what was planned and what Spark ran, each under its own label: a
source of 100 rows sized to 128 tasks (the minimum parallelism) that Spark ran in 2 tasks is not traced as
having run with 128. No Spark: the trace is built by hand."""

from __future__ import annotations

from typing import Any

from airflow_provider_finegrained.contract import OutputRecord, StageTrace
from airflow_provider_finegrained.operators.trace_text import format_trace
from airflow_provider_finegrained.runtime.spark_status import SparkStageTasks, StageTaskReport


def source_trace(spark_tasks: dict[str, Any] | None) -> StageTrace:
    return StageTrace(
        stage="numbers",
        region="region-1",
        slot_sharing_group="default",
        region_leader="numbers",
        config={"min_parallelism": 128, "max_parallelism": 1000, "avg_bytes_per_task": 2**20},
        decided_parallelism=128,
        rule="no input: min_parallelism",
        parallelism=128,
        waves=64,
        executors=1,
        executor_cores=2,
        executor_memory=2**30,
        spark_tasks=spark_tasks,
    )


def two_tasks() -> dict[str, Any]:
    stage = SparkStageTasks(
        stage_id=0, attempt=0, status="COMPLETE", tasks=2, per_executor={"driver": 2}, run_time_s=0.1, cpu_time_s=0.1
    )
    return StageTaskReport(["driver"], [stage]).to_dict()


def rows(text: str) -> dict[str, str]:
    """The trace's rows by label (two spaces of indent, the label, two or more spaces, the value)."""
    found = {}
    for line in text.splitlines()[1:]:
        label, _, value = line.strip().partition("  ")
        found[label] = value.strip()
    return found


RECORD = OutputRecord("numbers", "/out/numbers/try=1", "parquet", [1024], 100, 1)


def test_a_small_source_is_traced_with_what_was_planned_and_what_spark_ran() -> None:
    text = format_trace(source_trace(two_tasks()), RECORD)
    assert "ran with 128" not in " ".join(text.split())
    traced = rows(text)
    assert "ran with" not in traced
    assert traced["planned"].startswith("128 tasks in 64 wave(s)")
    assert traced["spark ran"].startswith("2 tasks in 1 Spark stage(s) on 1 executor(s)")


def test_without_sparks_task_report_the_trace_says_so_and_claims_nothing() -> None:
    traced = rows(format_trace(source_trace(None), RECORD))
    assert traced["planned"].startswith("128 tasks in 64 wave(s)")
    assert traced["spark ran"] == "- (no task report from Spark)"
