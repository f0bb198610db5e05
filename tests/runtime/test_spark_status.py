"""Reading Spark's own task report: stage attempts as the status API lists them, and the spread over executors."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_finegrained.launchers.http import HttpRequestError
from airflow_provider_finegrained.runtime.spark_status import (
    SparkStageTasks,
    StageTaskReport,
    _report,
    collect_session,
    get_status_json,
    parse_stage_attempts,
    task_spread,
)
from tests.capacity.test_sources import RecordingServer, closed_port_url


def attempt(
    stage: int, status: str, tasks: int, per_executor: dict[str, int], run_ms: int = 0, cpu_ns: int = 0
) -> dict[str, Any]:
    # The fields of /api/v1/applications/<app>/stages/<id> that the report reads (Spark 4.3).
    return {
        "stageId": stage,
        "attemptId": 0,
        "status": status,
        "numTasks": tasks,
        "executorRunTime": run_ms,
        "executorCpuTime": cpu_ns,
        "executorSummary": {k: {"succeededTasks": v, "failedTasks": 0} for k, v in per_executor.items()},
    }


def test_attempts_become_stage_tasks_with_seconds() -> None:
    (parsed,) = parse_stage_attempts([attempt(3, "COMPLETE", 4, {"0": 2, "1": 2}, run_ms=1500, cpu_ns=2_500_000_000)])
    assert parsed == SparkStageTasks(3, 0, "COMPLETE", 4, {"0": 2, "1": 2}, 1.5, 2.5)


@pytest.mark.parametrize(
    ("executors", "per_executor", "expected"),
    [
        (["0", "1", "2", "3"], {"0": 2, "1": 2, "2": 2, "3": 2}, (2, 2)),
        (["0", "1", "2", "3"], {"0": 3, "1": 2, "2": 2, "3": 1}, (1, 3)),
        (["0", "1", "2", "3"], {"0": 1, "1": 1}, (0, 1)),  # two tasks on four executors: idle ones count as 0
        (["0", "1"], {"0": 2, "1": 1, "7": 1}, (1, 2)),  # executor 7 was lost during the stage but ran a task
        ([], {}, (0, 0)),
    ],
)
def test_task_spread_counts_idle_executors(
    executors: list[str], per_executor: dict[str, int], expected: tuple[int, int]
) -> None:
    stage = SparkStageTasks(0, 0, "COMPLETE", sum(per_executor.values()), per_executor, 0, 0)
    assert task_spread(StageTaskReport(executors, [stage]), stage) == expected


def test_report_waits_for_the_status_store_and_leaves_out_the_driver_on_a_cluster() -> None:
    answers = {
        "/stages/1": [[attempt(1, "ACTIVE", 2, {"0": 1})], [attempt(1, "COMPLETE", 2, {"0": 1, "1": 1})]],
        "/stages/2": [[attempt(2, "SKIPPED", 2, {})]],
        "/executors": [
            [
                {"id": "driver", "isActive": True, "hostPort": "127.0.0.1:40000"},
                {"id": "0", "isActive": True, "executorLogs": {"stdout": "http://127.0.0.1:8081/logPage/?x=1"}},
                {"id": "1", "isActive": True, "executorLogs": {"stdout": "http://127.0.0.1:8082/logPage/?x=1"}},
                {"id": "9", "isActive": False},
            ]
        ],
    }

    def get(path: str) -> Any:
        replies = answers[path]
        return replies.pop(0) if len(replies) > 1 else replies[0]

    report = _report(get, [1, 2], timeout_s=5)
    assert report.executors == ["0", "1"]
    assert report.executor_workers == {"0": "127.0.0.1:8081", "1": "127.0.0.1:8082"}
    assert [s.status for s in report.spark_stages] == ["COMPLETE", "SKIPPED"]
    assert report.total_tasks == 2  # a skipped stage ran nothing
    assert StageTaskReport.from_dict(report.to_dict()) == report


def test_local_mode_keeps_the_driver_as_its_only_executor() -> None:
    report = _report(lambda path: [{"id": "driver", "hostPort": "localhost:1"}] if path == "/executors" else [], [], 1)
    assert report.executors == ["driver"]


def test_a_spark_connect_sessions_report_is_read_over_http_from_the_status_api() -> None:
    """collect_session reads the driver's /api/v1 through the provider's HTTP client (a real loopback server)."""
    server = RecordingServer()
    base = "/api/v1/applications/app-1"
    try:
        server.serve(
            f"{base}/jobs",
            [
                {"jobId": 1, "jobTags": ["spark-connect", "_Session_s-1_"], "stageIds": [3]},
                {"jobId": 2, "jobTags": ["_Session_other_"], "stageIds": [4]},
            ],
        )
        server.serve(f"{base}/stages/3", [attempt(3, "COMPLETE", 2, {"0": 2}, run_ms=500)])
        server.serve(f"{base}/executors", [{"id": "driver"}, {"id": "0"}])
        report = collect_session(server.url + "/", "app-1", "s-1", timeout_s=5)
        assert report == StageTaskReport(["0"], [SparkStageTasks(3, 0, "COMPLETE", 2, {"0": 2}, 0.5, 0.0)], {"0": ""})
        assert [path for _, path, _ in server.requests] == [f"{base}/jobs", f"{base}/stages/3", f"{base}/executors"]
        assert {accept for _, _, accept in server.requests} == {"application/json"}
        # A 503 would be retried by the client's default; the status API is asked once (a best-effort report).
        server.serve("/api/v1/applications/app-2/jobs", {"error": "busy"}, status=503)
        with pytest.raises(HttpRequestError, match=r"GET .*/api/v1/applications/app-2/jobs answered HTTP 503"):
            collect_session(server.url, "app-2", "s-1")
    finally:
        server.close()
    with pytest.raises(HttpRequestError) as caught:
        get_status_json(closed_port_url())
    assert caught.value.reason == "[Errno 111] Connection refused"
    assert len(server.requests) == 4


def test_spark_byte_and_record_counts_are_kept_and_old_reports_still_read() -> None:
    # Field names as a real Spark 4.3 local session's /api/v1/applications/<app>/stages answers them.
    spark_fields = {
        "inputBytes": 8510,
        "inputRecords": 200_000,
        "shuffleReadBytes": 1944,
        "shuffleWriteBytes": 2000,
        "memoryBytesSpilled": 4096,
        "diskBytesSpilled": 1024,
        "peakExecutionMemory": 8_650_736,
    }
    (parsed,) = parse_stage_attempts([attempt(2, "COMPLETE", 2, {"0": 2}) | spark_fields])
    assert (
        parsed.input_bytes,
        parsed.input_records,
        parsed.shuffle_read_bytes,
        parsed.shuffle_write_bytes,
        parsed.memory_bytes_spilled,
        parsed.disk_bytes_spilled,
        parsed.peak_execution_memory,
    ) == (8510, 200_000, 1944, 2000, 4096, 1024, 8_650_736)
    assert parsed.spilled
    skipped = parse_stage_attempts([attempt(3, "SKIPPED", 2, {}) | spark_fields])[0]
    report = StageTaskReport(["0"], [parsed, skipped])
    assert report.total("shuffle_read_bytes") == 1944  # a skipped stage read nothing
    assert StageTaskReport.from_dict(report.to_dict()) == report
    # A report written before these counts were kept reads as zeros.
    old = {
        "executors": ["0"],
        "spark_stages": [
            {
                "stage_id": 1,
                "attempt": 0,
                "status": "COMPLETE",
                "tasks": 2,
                "per_executor": {"0": 2},
                "run_time_s": 1.0,
                "cpu_time_s": 0.5,
            }
        ],
    }
    (stage,) = StageTaskReport.from_dict(old).spark_stages
    assert (stage.shuffle_read_bytes, stage.peak_execution_memory, stage.spilled) == (0, 0, False)
    with pytest.raises(ValueError, match="unknown Spark stage metric 'bytes'; known: input_bytes, input_records"):
        report.total("bytes")
