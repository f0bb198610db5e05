"""A stage's progress as readable log lines, instead of Spark's console progress bar.

:class:`ProgressReporter` turns snapshots of the Spark stages a region stage runs into lines such as
``spark stage 3 (parquet at ...): 12/40 tasks done, 84.1 MiB written``: one when a Spark stage starts,
at most one every ``interval_s`` while it moves, and one when it ends. Two feeds:

- :func:`progress_lines` (classic SparkSession): a daemon thread polls the application's own status
  REST API for the jobs of one job group, with byte metrics.
- :func:`connect_progress_lines` (Spark Connect): the client's progress handler
  (``spark.registerProgressHandler``), which knows tasks and bytes read.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from airflow_provider_finegrained.planning.units import format_bytes
from airflow_provider_finegrained.runtime.spark_status import get_status_json

DEFAULT_INTERVAL_S = 5.0
DEFAULT_POLL_S = 1.0
SETTLE_S = 5.0
"""How long the last poll waits for Spark's status store to mark the stages it saw as ended."""
NAME_WIDTH = 60
_ENDED = frozenset({"COMPLETE", "FAILED", "SKIPPED"})

Log = Callable[[str], None]


@dataclass(frozen=True)
class StageSnapshot:
    """One Spark stage (its latest attempt) at one moment."""

    stage_id: int
    name: str
    tasks: int
    done_tasks: int
    failed_tasks: int = 0
    active_tasks: int = 0
    read_bytes: int | None = None
    written_bytes: int | None = None
    """Output plus shuffle write; None when the source does not know (Spark Connect)."""
    ended: bool = False
    status: str = ""
    """Spark's stage status (ACTIVE, COMPLETE, FAILED, SKIPPED) when the source knows it."""

    def progress(self) -> tuple[int, int, int | None, int | None]:
        return self.done_tasks, self.failed_tasks, self.read_bytes, self.written_bytes


@dataclass
class _Seen:
    last: StageSnapshot
    reported_at: float
    ended: bool = False


class ProgressReporter:
    """Readable, throttled progress lines for the Spark stages of one region stage.

    Thread-safe: a poller thread may call :meth:`update` while the stage's thread calls :meth:`close`.
    """

    def __init__(
        self, log: Log, interval_s: float = DEFAULT_INTERVAL_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.log = log
        self.interval_s = interval_s
        self.clock = clock
        self._seen: dict[int, _Seen] = {}
        self._lock = threading.Lock()

    def update(self, snapshots: Iterable[StageSnapshot]) -> None:
        """Take the latest state of some Spark stages; log what is new, ended, or due."""
        with self._lock:
            for snap in sorted(snapshots, key=lambda s: s.stage_id):
                self._update(snap)

    def _update(self, snap: StageSnapshot) -> None:
        now = self.clock()
        seen = self._seen.get(snap.stage_id)
        if seen is None:
            if snap.status == "SKIPPED":
                return  # its output was reused from an earlier job: nothing ran
            seen = self._seen[snap.stage_id] = _Seen(snap, now)
            if not snap.ended:
                self.log(f"{_title(snap)}: started, {snap.tasks} tasks")
                return
        if seen.ended:
            return
        if snap.ended:
            seen.last, seen.ended, seen.reported_at = snap, True, now
            self.log(f"{_title(snap)}: {_outcome(snap)}, {_numbers(snap)}")
        elif snap.progress() != seen.last.progress() and now - seen.reported_at >= self.interval_s:
            seen.last, seen.reported_at = snap, now
            self.log(f"{_title(snap)}: {_numbers(snap)}")
        else:
            # Keep the latest numbers for close(), but not its time: the throttle counts from the last line.
            seen.last = snap

    def close(self) -> None:
        """Say where Spark stages that never reported their end were left (the stage failed or was cut short)."""
        with self._lock:
            for seen in self._seen.values():
                if not seen.ended:
                    seen.ended = True
                    self.log(f"{_title(seen.last)}: left unfinished, {_numbers(seen.last)}")


def _title(snap: StageSnapshot) -> str:
    name = " ".join(snap.name.split())
    if len(name) > NAME_WIDTH:
        name = name[: NAME_WIDTH - 3] + "..."
    return f"spark stage {snap.stage_id}" + (f" ({name})" if name else "")


def _outcome(snap: StageSnapshot) -> str:
    if snap.status == "FAILED":
        return "failed"
    return "finished" if snap.done_tasks >= snap.tasks else "ended"


def _numbers(snap: StageSnapshot) -> str:
    parts = [f"{snap.done_tasks}/{snap.tasks} tasks done"]
    if snap.failed_tasks:
        parts.append(f"{snap.failed_tasks} failed")
    if snap.active_tasks and not snap.ended:
        parts.append(f"{snap.active_tasks} running")
    if snap.read_bytes:
        parts.append(f"{format_bytes(snap.read_bytes)} read")
    if snap.written_bytes:
        parts.append(f"{format_bytes(snap.written_bytes)} written")
    return ", ".join(parts)


# --- classic SparkSession: the driver's status REST API ---------------------------------------------------------


def snapshot_from_rest(stage: Mapping[str, Any]) -> StageSnapshot:
    """A stage as ``/api/v1/applications/<app>/stages`` lists it (one attempt)."""
    status = str(stage.get("status", ""))
    return StageSnapshot(
        stage_id=int(stage["stageId"]),
        name=str(stage.get("name", "")),
        tasks=int(stage.get("numTasks", 0)),
        done_tasks=int(stage.get("numCompleteTasks", 0)),
        failed_tasks=int(stage.get("numFailedTasks", 0)),
        active_tasks=int(stage.get("numActiveTasks", 0)),
        read_bytes=int(stage.get("inputBytes", 0)),
        written_bytes=int(stage.get("outputBytes", 0)) + int(stage.get("shuffleWriteBytes", 0)),
        ended=status in _ENDED,
        status=status,
    )


def group_snapshots(get: Callable[[str], Any], job_group: str) -> list[StageSnapshot]:
    """The latest attempt of every started Spark stage of the jobs in ``job_group`` (``get``: path to JSON)."""
    stage_ids = {int(s) for job in get("/jobs") if job.get("jobGroup") == job_group for s in job.get("stageIds", [])}
    if not stage_ids:
        return []
    latest: dict[int, Mapping[str, Any]] = {}
    for stage in get("/stages?status=active&status=complete&status=failed&status=skipped"):
        sid = int(stage["stageId"])
        if sid in stage_ids and int(stage.get("attemptId", 0)) >= int(latest.get(sid, {}).get("attemptId", -1)):
            latest[sid] = stage
    return [snapshot_from_rest(s) for s in latest.values()]


class _Poller(threading.Thread):
    def __init__(self, poll: Callable[[], object], period_s: float) -> None:
        super().__init__(name="finegrained-progress", daemon=True)
        self.poll, self.period_s = poll, period_s
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(self.period_s):
            try:
                self.poll()
            except Exception:  # a progress line must never fail or stall the stage; the next poll tries again
                continue


@contextmanager
def progress_lines(
    spark: Any,
    job_group: str,
    log: Log,
    interval_s: float = DEFAULT_INTERVAL_S,
    poll_s: float = DEFAULT_POLL_S,
) -> Iterator[ProgressReporter]:
    """Log the progress of the Spark jobs run under ``job_group`` while the block runs (classic sessions).

    Without a Spark UI (``spark.ui.enabled=false``) it logs nothing.
    """
    reporter = ProgressReporter(log, interval_s)
    sc = spark.sparkContext
    ui = sc.uiWebUrl
    if not ui:
        yield reporter
        return
    base = f"{ui}/api/v1/applications/{sc.applicationId}"

    def poll() -> list[StageSnapshot]:
        snapshots = group_snapshots(lambda path: get_status_json(base + path), job_group)
        reporter.update(snapshots)
        return snapshots

    poller = _Poller(poll, poll_s)
    poller.start()
    try:
        yield reporter
    finally:
        poller.stopping.set()
        poller.join()
        _settle(poll)
        reporter.close()


def _settle(poll: Callable[[], list[StageSnapshot]]) -> None:
    # Spark's listener bus fills the status store shortly after a job ends: poll until the stages seen have ended.
    deadline = time.monotonic() + SETTLE_S
    while True:
        try:
            if all(s.ended for s in poll()) or time.monotonic() > deadline:
                return
        except Exception:
            return
        time.sleep(0.2)


# --- Spark Connect: the client's progress handler ---------------------------------------------------------------


class ConnectProgressHandler:
    """A ``pyspark.sql.connect.shell.progress.ProgressHandler`` feeding a :class:`ProgressReporter`."""

    def __init__(self, reporter: ProgressReporter) -> None:
        self.reporter = reporter

    def __call__(self, stages: Iterable[Any] | None, inflight_tasks: int, operation_id: str | None, done: bool) -> None:
        # The client reports ``done`` from its Progress.__exit__, also when the operation raised; the last
        # update from the server may predate the last tasks. An operation that returned ran all its tasks.
        succeeded = done and sys.exc_info()[0] is None
        self.reporter.update(
            StageSnapshot(
                stage_id=int(s.stage_id),
                name="",
                tasks=int(s.num_tasks),
                done_tasks=int(s.num_tasks) if succeeded and not s.done else int(s.num_completed_tasks),
                read_bytes=int(s.num_bytes_read),
                ended=bool(s.done) or done,
            )
            for s in stages or ()
        )


@contextmanager
def connect_progress_lines(spark: Any, log: Log, interval_s: float = DEFAULT_INTERVAL_S) -> Iterator[ProgressReporter]:
    """Log the progress of what a Spark Connect session runs while the block runs."""
    reporter = ProgressReporter(log, interval_s)
    handler = ConnectProgressHandler(reporter)
    spark.registerProgressHandler(handler)
    try:
        yield reporter
    finally:
        spark.removeProgressHandler(handler)
        reporter.close()
