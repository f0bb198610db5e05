"""The Spark driver program of a region: runs its stages in order in one SparkSession.

``spark-submit driver.py JOB_JSON``. Stages of the region hand their outputs to each other in memory;
an output read outside the region is committed with the atomic output protocol. Each stage's result
(or its error and traceback) goes to a status file the Airflow tasks read. After a failure the
remaining stages are reported as not run, and the exit code is 1.
"""

from __future__ import annotations

import runpy
import sys
import traceback
from datetime import UTC, datetime
from typing import Any

from airflow_provider_finegrained.runtime import api, spark_status
from airflow_provider_finegrained.runtime.job import InputRef, RegionJob, StageJob, StageStatus
from airflow_provider_finegrained.runtime.output import write_and_commit

LOG_PREFIX = "[finegrained]"


class StageLog:
    """Prints a stage's lines to the driver output and keeps them for the stage's own Airflow task."""

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self.lines: list[str] = []

    def __call__(self, message: str) -> None:
        line = f"{LOG_PREFIX} stage {self.stage}: {message}"
        self.lines.append(line)
        print(line, flush=True)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {argv[0]} JOB_JSON", file=sys.stderr)
        return 2
    return run_region(RegionJob.load(argv[1]))


def run_region(job: RegionJob) -> int:
    from pyspark.sql import SparkSession

    # The application name comes from spark-submit (--name), which names the region's run and try.
    spark = SparkSession.builder.getOrCreate()
    app_id = spark.sparkContext.applicationId
    print(f"{LOG_PREFIX} region {job.region}: application {app_id}, stages {[s.name for s in job.stages]}", flush=True)
    frames: dict[str, Any] = {}
    failed: str | None = None
    try:
        for stage in job.stages:
            path = job.status_path(stage.name)
            if failed is not None:
                StageStatus(
                    stage.name,
                    "not_run",
                    error=f"not run: stage {failed!r} of region {job.region} failed",
                    application_id=app_id,
                ).write(path)
                continue
            status = _run_stage(spark, job, stage, frames, app_id)
            status.write(path)
            if status.state != "success":
                failed = stage.name
    finally:
        spark.stop()
    return 1 if failed else 0


def _run_stage(spark: Any, job: RegionJob, stage: StageJob, frames: dict[str, Any], app_id: str) -> StageStatus:
    log = StageLog(stage.name)
    started = _now()
    log("started")
    spark.sparkContext.setJobGroup(stage.name, f"stage {stage.name} of region {job.region}")
    try:
        for key, value in stage.session_conf.items():
            spark.conf.set(key, value)
        inputs = {ref.name: _load_input(spark, ref, frames) for ref in stage.inputs}
        result = _call_stage(spark, stage, inputs)
        _check_dataframe(stage.name, result)
        if stage.handover and stage.output_location:
            result = result.persist()  # read again in memory by the region: compute once
        output = None
        if stage.output_location:
            committed = write_and_commit(result, stage.output_location, stage.output_format, root=job.storage_root)
            output = committed.to_dict()
            log(f"committed {committed.rows} rows, {committed.total_bytes} bytes in {len(committed.files)} files")
        else:
            log("output handed over in memory")
        frames[stage.name] = result
        ended = _now()
        tasks = _task_report(spark, stage.name, log)
        log("finished")
        return StageStatus(
            stage.name,
            "success",
            output=output,
            started_at=started,
            ended_at=ended,
            application_id=app_id,
            log=log.lines,
            spark_tasks=tasks,
        )
    except BaseException as exc:  # every failure, even KeyboardInterrupt, is reported to the stage's task
        trace = traceback.format_exc()
        print(trace, file=sys.stderr, flush=True)
        log(f"failed: {type(exc).__name__}: {exc}")
        return StageStatus(
            stage.name,
            "failed",
            error=f"{type(exc).__name__}: {exc}",
            traceback=trace,
            started_at=started,
            ended_at=_now(),
            application_id=app_id,
            log=log.lines,
        )


def _task_report(spark: Any, stage: str, log: StageLog) -> dict[str, Any] | None:
    try:
        report = spark_status.collect(spark, stage)
    except Exception as exc:  # a measurement must never fail the stage it measures
        log(f"could not read Spark's task report: {type(exc).__name__}: {exc}")
        return None
    if report is None:
        return None
    log(f"ran {report.total_tasks} Spark tasks on {len(report.executors)} executor(s)")
    return report.to_dict()


def _load_input(spark: Any, ref: InputRef, frames: dict[str, Any]) -> Any:
    if ref.source == "stage":
        df = frames[ref.stage or ref.name]
    else:
        df = spark.read.format(ref.format).options(**ref.options).load(ref.path)
    if ref.broadcast:
        from pyspark.sql.functions import broadcast

        df = broadcast(df)
    return df


def _call_stage(spark: Any, stage: StageJob, inputs: dict[str, Any]) -> Any:
    if stage.callable_path:
        from pyspark import cloudpickle

        with open(stage.callable_path, "rb") as handle:
            fn = cloudpickle.loads(handle.read())
        return fn(spark, **inputs, **stage.kwargs)
    if not stage.application:
        raise ValueError(f"stage {stage.name!r} has neither a callable nor an application file")
    context = api.StageContext(stage.name, spark, inputs, stage.application_args)
    api._activate(context)
    argv = sys.argv
    try:
        sys.argv = [stage.application, *stage.application_args]
        runpy.run_path(stage.application, run_name="__main__")
    finally:
        sys.argv = argv
        api._activate(None)
    if context.published is None:
        raise api.StageContextError(
            f"application {stage.application} of stage {stage.name!r} published no output; "
            "call current_stage().publish(df) with the stage's DataFrame"
        )
    return context.published


def _check_dataframe(stage: str, value: Any) -> None:
    from pyspark.sql import DataFrame

    if not isinstance(value, DataFrame):
        raise TypeError(
            f"stage {stage!r} returned {type(value).__name__}, not a pyspark.sql.DataFrame; "
            "a stage function must return the DataFrame to publish"
        )


def _now() -> str:
    return datetime.now(UTC).isoformat()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
