"""What Spark itself reports about a stage's work, read from the driver's status REST API.

Each region stage runs its Spark jobs under a job group named after the stage; afterwards the
driver asks its own UI (``/api/v1``) which Spark stages those jobs ran, how many tasks each executor
ran and how much time and CPU they took. This is Spark's own measurement of balance (FLIP-370),
kept in the stage's status and trace.
"""

from __future__ import annotations

import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

# Only requests and secrets.py: this module runs inside the Spark driver.
from airflow_provider_finegrained.launchers.http import get_json

_DONE = frozenset({"COMPLETE", "SKIPPED", "FAILED"})
STATUS_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class SparkStageTasks:
    """One Spark stage (attempt) of a region stage: its tasks and which executors ran them."""

    stage_id: int
    attempt: int
    status: str
    tasks: int
    per_executor: dict[str, int]
    """Succeeded tasks by executor id."""
    run_time_s: float
    cpu_time_s: float
    # Spark's own byte and record counts (the status API's stage fields; 0 in reports written before
    # they were kept). Sums over the attempt's tasks, peak_execution_memory included.
    input_bytes: int = 0
    """``inputBytes``: bytes read from files (parquet counts only the columns read)."""
    input_records: int = 0
    shuffle_read_bytes: int = 0
    shuffle_write_bytes: int = 0
    memory_bytes_spilled: int = 0
    """``memoryBytesSpilled``: the in-memory size of what was spilled."""
    disk_bytes_spilled: int = 0
    peak_execution_memory: int = 0
    """``peakExecutionMemory``: the sum of each task's peak execution memory."""

    @property
    def spilled(self) -> bool:
        return self.memory_bytes_spilled > 0 or self.disk_bytes_spilled > 0


_METRIC_FIELDS = {
    "input_bytes": "inputBytes",
    "input_records": "inputRecords",
    "shuffle_read_bytes": "shuffleReadBytes",
    "shuffle_write_bytes": "shuffleWriteBytes",
    "memory_bytes_spilled": "memoryBytesSpilled",
    "disk_bytes_spilled": "diskBytesSpilled",
    "peak_execution_memory": "peakExecutionMemory",
}
"""Our field name to the Spark 4 status API's name in ``/api/v1/applications/<app>/stages/<id>``."""


@dataclass(frozen=True)
class StageTaskReport:
    """Spark's own account of a region stage: its Spark stages and the executors that were alive."""

    executors: list[str]
    spark_stages: list[SparkStageTasks] = field(default_factory=list)
    executor_workers: dict[str, str] = field(default_factory=dict)
    """Executor id to the worker that runs it (the address of the worker's log server; host otherwise)."""

    @property
    def total_tasks(self) -> int:
        return sum(s.tasks for s in self.spark_stages if s.status != "SKIPPED")

    @property
    def cpu_time_s(self) -> float:
        return sum(s.cpu_time_s for s in self.spark_stages)

    def total(self, metric: str) -> int:
        """``metric`` (a byte or record field of :class:`SparkStageTasks`) summed over the Spark stages that ran."""
        if metric not in _METRIC_FIELDS:
            raise ValueError(f"unknown Spark stage metric {metric!r}; known: {', '.join(_METRIC_FIELDS)}")
        return sum(int(getattr(s, metric)) for s in self.spark_stages if s.status != "SKIPPED")

    def to_dict(self) -> dict[str, Any]:
        return {
            "executors": self.executors,
            "spark_stages": [asdict(s) for s in self.spark_stages],
            "executor_workers": self.executor_workers,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StageTaskReport:
        return cls(
            list(data["executors"]),
            [SparkStageTasks(**s) for s in data.get("spark_stages", [])],
            dict(data.get("executor_workers", {})),
        )


def task_spread(report: StageTaskReport, stage: SparkStageTasks) -> tuple[int, int]:
    """(fewest, most) succeeded tasks an alive executor ran in ``stage`` (executors that ran none count as 0)."""
    counts = [stage.per_executor.get(e, 0) for e in report.executors] or [0]
    ran_elsewhere = [n for e, n in stage.per_executor.items() if e not in report.executors]
    counts += ran_elsewhere  # an executor lost during the stage still ran its tasks
    return min(counts), max(counts)


def parse_stage_attempts(attempts: Iterable[Mapping[str, Any]]) -> list[SparkStageTasks]:
    """The attempts of one Spark stage as ``/api/v1/applications/<app>/stages/<id>`` lists them."""
    return [
        SparkStageTasks(
            stage_id=int(a["stageId"]),
            attempt=int(a.get("attemptId", 0)),
            status=str(a["status"]),
            tasks=int(a["numTasks"]),
            per_executor={k: int(v.get("succeededTasks", 0)) for k, v in (a.get("executorSummary") or {}).items()},
            run_time_s=int(a.get("executorRunTime", 0)) / 1000,
            cpu_time_s=int(a.get("executorCpuTime", 0)) / 1e9,
            **{ours: int(a.get(theirs) or 0) for ours, theirs in _METRIC_FIELDS.items()},
        )
        for a in attempts
    ]


def collect(spark: Any, group: str, timeout_s: float = 10.0) -> StageTaskReport | None:
    """Spark's report of the jobs run under job group ``group``; None when the UI is off."""
    sc = spark.sparkContext
    ui = sc.uiWebUrl
    if not ui:
        return None
    base = f"{ui}/api/v1/applications/{sc.applicationId}"
    tracker = sc.statusTracker()
    stage_ids = sorted(
        {s for job in tracker.getJobIdsForGroup(group) if (info := tracker.getJobInfo(job)) for s in info.stageIds}
    )
    return _report(lambda path: get_status_json(base + path), stage_ids, timeout_s)


def collect_session(ui_url: str, application_id: str, session_id: str, timeout_s: float = 10.0) -> StageTaskReport:
    """Spark's report of the jobs a Spark Connect session ran (the server tags them with its id)."""
    base = f"{ui_url.rstrip('/')}/api/v1/applications/{application_id}"
    marker = f"_Session_{session_id}_"
    jobs = get_status_json(base + "/jobs")
    stage_ids = sorted(
        {s for job in jobs if any(marker in tag for tag in job.get("jobTags") or []) for s in job.get("stageIds", [])}
    )
    return _report(lambda path: get_status_json(base + path), stage_ids, timeout_s)


def _report(get: Callable[[str], Any], stage_ids: list[int], timeout_s: float) -> StageTaskReport:
    # The status store is filled by Spark's listener bus after the job ends: wait for it to settle.
    deadline = time.monotonic() + timeout_s
    while True:
        stages = [a for sid in stage_ids for a in parse_stage_attempts(get(f"/stages/{sid}"))]
        if all(s.status in _DONE for s in stages) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    infos = [e for e in get("/executors") if e.get("isActive", True)]
    alive = sorted(e["id"] for e in infos)
    # On a cluster the driver is listed too but runs no tasks; in local mode it is the only executor.
    executors = [e for e in alive if e != "driver"] or alive
    workers = {e["id"]: _worker_of(e) for e in infos if e["id"] in executors}
    return StageTaskReport(executors, stages, workers)


def _worker_of(info: Mapping[str, Any]) -> str:
    # A standalone worker serves its executors' logs: that address tells workers on one host apart.
    logs = info.get("executorLogs") or {}
    url = logs.get("stdout") or logs.get("stderr")
    if url:
        return urllib.parse.urlsplit(str(url)).netloc
    return str(info.get("hostPort", "")).rsplit(":", 1)[0]


def get_status_json(url: str) -> Any:
    """GET one document of a driver's status API (``.../api/v1/...``) through the provider's HTTP client."""
    # Generous: a driver's REST API answers in milliseconds, but on a saturated machine it took over 10 s.
    # One try: a retry after such a timeout would hold the stage's end for minutes, and the report and
    # the progress lines are best-effort (their callers log a failure and go on).
    return get_json(url, STATUS_TIMEOUT_S, retries=0)
