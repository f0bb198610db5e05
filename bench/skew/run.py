"""The skew experiment's run: every variant in one warm ``local[2]`` session, and what Spark measured of it.

Per run, from Spark's REST API: the fact scan's task input (records read) and the join stage's task
shuffle-read bytes, as max/median, and per scan and join stage where the time went.
"""

from __future__ import annotations

import datetime as dt
import os
import statistics
import time
from pathlib import Path
from typing import Any

from bench.lib.session import apply_conf
from bench.lib.spark_metrics import application_api, get_json, tagged_stage_ids
from bench.lib.stats import max_over_median
from bench.lib.sweep import in_turn
from bench.skew.data import consumer, largest_first
from bench.skew.settings import decided_conf, reads


def session_conf(tmp: Path) -> dict[str, str]:
    """The one warm local[2] session's: broadcast joins off (a dimension too large to broadcast)."""
    return {
        "spark.driver.memory": "2g",
        "spark.local.dir": str(tmp / "spark-local"),
        "spark.sql.warehouse.dir": str(tmp / "warehouse"),
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        "spark.ui.port": "0",
        "spark.ui.retainedTasks": "1000000",
    }


def run_variants(spark: Any, tmp: Path, upstream: dict[str, Path], variants: list[str], reps: int) -> list[Any]:
    """Every variant ``reps`` times after a warm-up round (rep -1, not kept), each taking every place in turn."""
    dim_files = largest_first(tmp / "dim")
    runs: list[dict[str, Any]] = []
    for rep in range(-1, reps):
        for variant in in_turn(variants, rep + 1):
            fact = upstream[reads(variant)]
            conf, decided = decided_conf(variant, largest_first(fact), dim_files)
            apply_conf(spark, conf)
            group = f"{variant}-{rep}"
            spark.sparkContext.setJobGroup(group, group)
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            consumer(spark, fact, tmp / "dim", tmp / f"out-{group}")
            seconds = time.perf_counter() - t0
            metrics = stage_tasks(spark, group)
            print(
                f"rep {rep} {variant:15s} {seconds:6.2f}s  scan max/med {metrics['scan']['max_over_median']:5}"
                f" ({metrics['scan_tasks']} tasks)  join max/med {metrics['join']['max_over_median']:5}"
                f" ({metrics['join_tasks']} tasks)  load {load:.1f}",
                flush=True,
            )
            if rep >= 0:
                record = {"rep": rep, "variant": variant, "seconds": round(seconds, 3), "load_1m": load, **metrics}
                runs.append(record | {"conf": conf, **decided})
    return runs


# ---------------------------------------------------------------- what Spark measured


def stage_tasks(spark: Any, group: str) -> dict[str, Any]:
    """The fact scan's and the join stage's task bytes, and every stage's duration, from Spark's REST API."""
    sc = spark.sparkContext
    base = application_api(sc.uiWebUrl, sc.applicationId)
    stages = []
    for sid in tagged_stage_ids(get_json(f"{base}/jobs", 30), group, job_group=True):
        for attempt in get_json(f"{base}/stages/{sid}", 30):
            if attempt["status"] == "COMPLETE":
                tasks = get_json(f"{base}/stages/{sid}/{attempt['attemptId']}/taskList?offset=0&length=100000", 30)
                stages.append(_stage(sid, attempt, [t for t in tasks if t["status"] == "SUCCESS"]))
    # Spark's bytesRead counts little of a parquet read here (footers; FIELD-NOTES), so a scan task's input
    # is its recordsRead: the fact rows are all about the same size.
    scan = max(stages, key=lambda s: sum(s["records"]))
    join = max(stages, key=lambda s: sum(s["shuffle"]))
    return {
        "scan": _summary(scan["records"]),
        "scan_bytes_read": _summary(scan["input"]),
        "join": _summary(join["shuffle"]),
        "scan_tasks": scan["tasks"],
        "join_tasks": join["tasks"],
        "scan_timing": scan["timing"],
        "join_timing": join["timing"],
        "stages": [{k: s[k] for k in ("id", "name", "tasks", "seconds", "timing")} for s in stages],
    }


def _stage(sid: int, attempt: dict[str, Any], done: list[dict[str, Any]]) -> dict[str, Any]:
    """One completed Spark stage: its succeeded tasks' input, records, shuffle reads and time."""

    def shuffle_read(task: dict[str, Any]) -> int:
        read = task["taskMetrics"]["shuffleReadMetrics"]
        return int(read["localBytesRead"] + read["remoteBytesRead"])

    return {
        "id": sid,
        "name": attempt["name"],
        "tasks": len(done),
        "input": [t["taskMetrics"]["inputMetrics"]["bytesRead"] for t in done],
        "records": [t["taskMetrics"]["inputMetrics"]["recordsRead"] for t in done],
        "shuffle": [shuffle_read(t) for t in done],
        "seconds": sum(t["duration"] for t in done) / 1000,
        "timing": _timing(attempt, done),
    }


def _timing(attempt: dict[str, Any], done: list[dict[str, Any]]) -> dict[str, Any]:
    """A stage's wall time and where its tasks' time went (Spark's per-task metrics), in seconds."""

    def at(stamp: str) -> float:
        return float(dt.datetime.strptime(stamp.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp())

    def total(key: str) -> float:
        return round(sum(float(t["taskMetrics"][key]) for t in done) / 1000, 3)

    return {
        "wall": round(at(attempt["completionTime"]) - at(attempt["submissionTime"]), 3),
        "task_seconds": round(sum(t["duration"] for t in done) / 1000, 3),
        "run": total("executorRunTime"),
        "deserialize": total("executorDeserializeTime"),
        "scheduler_delay": round(sum(t.get("schedulerDelay", 0) for t in done) / 1000, 3),
        "longest_task": round(max((t["duration"] for t in done), default=0) / 1000, 3),
    }


def _summary(values: list[int]) -> dict[str, Any]:
    ordered = sorted(values)
    return {
        "tasks": len(values),
        "max": ordered[-1] if ordered else 0,
        "median": statistics.median(ordered) if ordered else 0,
        "max_over_median": round(max_over_median(ordered), 2),
    }
