"""Per stage of a run, what Spark measured: tasks, task time and CPU, shuffle bytes, spill.

Read from the pool's status REST API: a Spark Connect server tags every job with the client's tags
(``..._Tag_<tag>``), so a stage's jobs are found by its tag, then their Spark stages' metrics summed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from airflow_provider_finegrained.launchers.http import get_json

METRICS = (
    "tasks",
    "run_time_s",
    "cpu_time_s",
    "input_bytes",
    "shuffle_read_bytes",
    "shuffle_write_bytes",
    "memory_spilled_bytes",
    "disk_spilled_bytes",
)


def stage_metrics(
    ui_url: str, application_id: str, tags: Iterable[str], *, job_group: bool = False
) -> dict[str, dict[str, float]]:
    """``{tag: {metric: value}}`` summed over the completed Spark stages of the jobs tagged ``tag`` (or, with
    ``job_group``, of the jobs in the job group ``tag``: a classic session's tags carry its thread's id)."""
    base = f"{ui_url.rstrip('/')}/api/v1/applications/{application_id}"
    jobs = get_json(f"{base}/jobs", 60.0)
    out: dict[str, dict[str, float]] = {}
    for tag in tags:
        tagged = [job for job in jobs if _is_tagged(job, tag, job_group)]
        ids = sorted({s for job in tagged for s in job["stageIds"]})
        totals = dict.fromkeys(METRICS, 0.0)
        for sid in ids:
            for attempt in get_json(f"{base}/stages/{sid}", 60.0):
                if attempt.get("status") != "COMPLETE":
                    continue  # skipped stages reused an earlier shuffle: no work
                _add(totals, attempt)
        out[tag] = totals
    return out


def _is_tagged(job: dict[str, Any], tag: str, job_group: bool) -> bool:
    if job_group:
        return bool(job.get("jobGroup") == tag)
    return any(t == tag or t.endswith(f"_Tag_{tag}") for t in job.get("jobTags") or [])


def _add(totals: dict[str, float], a: dict[str, Any]) -> None:
    totals["tasks"] += int(a.get("numTasks", 0))
    totals["run_time_s"] += int(a.get("executorRunTime", 0)) / 1000
    totals["cpu_time_s"] += int(a.get("executorCpuTime", 0)) / 1e9
    totals["input_bytes"] += int(a.get("inputBytes", 0))
    totals["shuffle_read_bytes"] += int(a.get("shuffleReadBytes", 0))
    totals["shuffle_write_bytes"] += int(a.get("shuffleWriteBytes", 0))
    totals["memory_spilled_bytes"] += int(a.get("memoryBytesSpilled", 0))
    totals["disk_spilled_bytes"] += int(a.get("diskBytesSpilled", 0))
