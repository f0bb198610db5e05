"""Readable progress lines: the throttle with a fake clock, then real Spark (classic and Spark Connect)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_finegrained.runtime.progress import (
    ConnectProgressHandler,
    ProgressReporter,
    StageSnapshot,
    connect_progress_lines,
    progress_lines,
)
from airflow_provider_finegrained.spark.submit import CONNECT_CLIENT_ENV, environ_restored

MiB = 2**20


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def snap(done: int, written: int = 0, *, ended: bool = False, status: str = "ACTIVE", **kw: Any) -> StageSnapshot:
    return StageSnapshot(
        stage_id=kw.pop("stage_id", 3),
        name=kw.pop("name", "parquet at NativeMethodAccessorImpl.java:0"),
        tasks=40,
        done_tasks=done,
        written_bytes=written,
        ended=ended,
        status=status,
        **kw,
    )


def test_reporter_logs_start_throttled_progress_and_end() -> None:
    lines: list[str] = []
    clock = FakeClock()
    reporter = ProgressReporter(lines.append, interval_s=5.0, clock=clock)
    reporter.update([snap(0, active_tasks=2)])
    assert lines == ["spark stage 3 (parquet at NativeMethodAccessorImpl.java:0): started, 40 tasks"]
    for step in range(1, 5):  # 4 s of changes: within the interval, nothing more
        clock.now += 1
        reporter.update([snap(step * 2, step * MiB, active_tasks=2)])
    assert len(lines) == 1
    clock.now += 1  # 5 s after the start line: the latest numbers are due
    reporter.update([snap(12, int(84.1 * MiB), active_tasks=2)])
    assert lines[-1] == (
        "spark stage 3 (parquet at NativeMethodAccessorImpl.java:0): 12/40 tasks done, 2 running, 84.1 MiB written"
    )
    clock.now += 60  # no change: no line however long it takes
    reporter.update([snap(12, int(84.1 * MiB), active_tasks=2)])
    assert len(lines) == 2
    clock.now += 0.1  # the end is logged at once, whatever the interval
    reporter.update([snap(40, 200 * MiB, ended=True, status="COMPLETE", read_bytes=3 * MiB)])
    assert lines[-1] == (
        "spark stage 3 (parquet at NativeMethodAccessorImpl.java:0): finished, 40/40 tasks done, 3.0 MiB read, "
        "200.0 MiB written"
    )
    reporter.update([snap(40, 200 * MiB, ended=True, status="COMPLETE")])
    reporter.close()
    assert len(lines) == 3
    assert not any("\r" in line or "[=" in line for line in lines)


def test_reporter_stages_are_throttled_apart_and_skipped_ones_are_quiet() -> None:
    lines: list[str] = []
    clock = FakeClock()
    reporter = ProgressReporter(lines.append, interval_s=5.0, clock=clock)
    reporter.update([snap(0, stage_id=1, name=""), snap(0, stage_id=0, name="", status="SKIPPED", ended=True)])
    clock.now += 3
    reporter.update([snap(5, stage_id=1, name=""), snap(0, stage_id=2, name="")])
    clock.now += 3
    reporter.update([snap(9, stage_id=1, name=""), snap(9, stage_id=2, name="")])
    assert lines == [
        "spark stage 1: started, 40 tasks",
        "spark stage 2: started, 40 tasks",
        "spark stage 1: 9/40 tasks done",
    ]


def test_reporter_says_where_an_unfinished_stage_was_left_and_names_failures() -> None:
    lines: list[str] = []
    reporter = ProgressReporter(lines.append, interval_s=5.0, clock=FakeClock())
    reporter.update([snap(7, failed_tasks=4, stage_id=5, name="x" * 80)])
    reporter.update([snap(1, stage_id=6, name="count", ended=True, status="FAILED", failed_tasks=4)])
    reporter.close()
    assert lines == [
        f"spark stage 5 ({'x' * 57}...): started, 40 tasks",
        "spark stage 6 (count): failed, 1/40 tasks done, 4 failed",
        f"spark stage 5 ({'x' * 57}...): left unfinished, 7/40 tasks done, 4 failed",
    ]


class ConnectStage:
    def __init__(self, stage_id: int, num_tasks: int, done_tasks: int, read: int, done: bool) -> None:
        self.stage_id, self.num_tasks, self.num_completed_tasks = stage_id, num_tasks, done_tasks
        self.num_bytes_read, self.done = read, done


def test_connect_handler_ends_the_stages_of_an_ended_operation() -> None:
    lines: list[str] = []
    handler = ConnectProgressHandler(ProgressReporter(lines.append, interval_s=5.0, clock=FakeClock()))
    handler(stages=[ConnectStage(4, 8, 2, MiB, False)], inflight_tasks=2, operation_id="op", done=False)
    # The server's last update came before the last tasks ended; the operation returned, so all 8 ran.
    handler(stages=[ConnectStage(4, 8, 6, 2 * MiB, False)], inflight_tasks=0, operation_id="op", done=True)
    handler(stages=None, inflight_tasks=0, operation_id="op", done=True)
    assert lines == ["spark stage 4: started, 8 tasks", "spark stage 4: finished, 8/8 tasks done, 2.0 MiB read"]


def test_connect_handler_keeps_the_last_numbers_of_an_operation_that_raised() -> None:
    lines: list[str] = []
    handler = ConnectProgressHandler(ProgressReporter(lines.append, interval_s=5.0, clock=FakeClock()))
    handler(stages=[ConnectStage(5, 8, 3, 0, False)], inflight_tasks=2, operation_id="op", done=False)
    try:
        raise RuntimeError("the query failed")
    except RuntimeError:  # the client calls the handler from Progress.__exit__ while the error propagates
        handler(stages=[ConnectStage(5, 8, 3, 0, False)], inflight_tasks=0, operation_id="op", done=True)
    assert lines == ["spark stage 5: started, 8 tasks", "spark stage 5: ended, 3/8 tasks done"]


# -- real Spark ---------------------------------------------------------------------------------------------------


def slow_write(spark: Any, path: Path, partitions: int, shuffle_partitions: int) -> None:
    """A job of two Spark stages: ``partitions`` slow tasks that shuffle, then ``shuffle_partitions`` that write.

    Each slow task takes 50 x 40 ms = 2 s: the job spans several progress intervals (1 s) and polls (0.25 s)
    on two cores, and costs seconds rather than a minute."""

    def slow(x: int) -> tuple[int, str]:
        time.sleep(0.04)
        return x, "v" * 1000

    rows = spark.sparkContext.parallelize(range(partitions * 50), partitions).map(slow)
    spark.createDataFrame(rows, "n long, s string").repartition(shuffle_partitions).write.parquet(str(path))


@pytest.fixture(scope="module")
def classic_spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("progress-lines-test")
        .config("spark.ui.enabled", "true")  # explicit: an earlier session may have left it off in this JVM
        .config("spark.ui.port", "0")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.adaptive.enabled", "false")
        .getOrCreate()
    )
    try:
        yield spark
    finally:
        spark.stop()


@pytest.mark.slow
def test_progress_lines_of_a_classic_session(classic_spark: Any, tmp_path: Path) -> None:
    spark = classic_spark
    lines: list[str] = []
    spark.sparkContext.setJobGroup("numbers", "progress test")
    # Another group's job runs first: its stages must not show up.
    spark.range(10).count()
    spark.sparkContext.setJobGroup("writer", "progress test")
    with progress_lines(spark, "writer", lines.append, interval_s=1.0, poll_s=0.25):
        slow_write(spark, tmp_path / "out", partitions=8, shuffle_partitions=4)
    finished = [line for line in lines if ": finished, " in line]
    assert len(finished) == 2, lines
    shuffle, write = finished
    assert "8/8 tasks done" in shuffle and " written" in shuffle  # shuffle write bytes
    assert "4/4 tasks done" in write and " written" in write  # the parquet files
    assert any(line.endswith("started, 8 tasks") for line in lines), lines
    assert not any("\r" in line or "left unfinished" in line for line in lines)
    assert all(line.startswith("spark stage ") for line in lines)


def test_progress_lines_without_a_ui_say_nothing() -> None:
    lines: list[str] = []

    class NoUI:
        class sparkContext:  # the attribute of a SparkSession
            uiWebUrl = None

    with progress_lines(NoUI(), "g", lines.append):
        pass
    assert lines == []


@pytest.fixture(scope="module")
def connect_spark(classic_spark: Any) -> Iterator[Any]:
    """A Spark Connect session on a local Connect server in this process (after the classic session stopped)."""
    from pyspark.sql import SparkSession

    classic_spark.stop()
    # pyspark marks this process as a Connect client and leaves its local server's token in os.environ.
    with environ_restored(CONNECT_CLIENT_ENV):
        spark = (
            SparkSession.builder.remote("local[2]")
            .config("spark.connect.progress.reportInterval", "200ms")
            .getOrCreate()
        )
        try:
            yield spark
        finally:
            spark.stop()


@pytest.mark.slow
def test_progress_lines_of_a_spark_connect_session(
    connect_spark: Any, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    spark = connect_spark
    lines: list[str] = []
    with connect_progress_lines(spark, lines.append, interval_s=1.0):
        spark.range(0, 200_000, 1, 12).selectExpr("id", "repeat('v', 100) AS s").write.parquet(str(tmp_path / "c"))
    finished = [line for line in lines if ": finished, " in line]
    assert finished and all("12/12 tasks done" in line for line in finished), lines
    assert not any("\r" in line for line in lines)
    out, err = capfd.readouterr()
    assert "\r[" not in out + err  # the client's own progress bar stays off
