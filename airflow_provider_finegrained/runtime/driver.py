"""The Spark driver program of a region: runs its stages in order in one SparkSession.

``spark-submit driver.py JOB_JSON``. The stages share the session; in-memory handovers are plain
DataFrames. Each stage's result goes to a status file the Airflow tasks read (see
:mod:`runtime.region_loop`); the exit code is 1 when a stage failed.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from airflow_provider_finegrained.runtime import spark_status
from airflow_provider_finegrained.runtime.job import CONTEXT_DID_NOT_START, CONTEXT_NOT_STARTED, RegionJob, StageJob
from airflow_provider_finegrained.runtime.progress import progress_lines
from airflow_provider_finegrained.runtime.region_loop import LOG_PREFIX, run_stages, storage_options
from airflow_provider_finegrained.spark.parent_death import die_with_parent_jvm


class ClassicSessions:
    """One classic SparkSession for the whole region (this process is the application's driver)."""

    def __init__(self, spark: Any) -> None:
        self.spark = spark
        self.application_id: str = spark.sparkContext.applicationId
        self.ui_url: str | None = spark.sparkContext.uiWebUrl
        self._frames: dict[str, Any] = {}

    def open(self, stage: StageJob) -> Any:
        return self.spark

    def close(self, spark: Any, stage: StageJob) -> None:
        pass

    @contextlib.contextmanager
    def scope(self, spark: Any, job: RegionJob, stage: StageJob, log: Callable[[str], None]) -> Iterator[None]:
        spark.sparkContext.setJobGroup(stage.name, f"stage {stage.name} of region {job.region}")
        with progress_lines(spark, stage.name, log):
            yield

    def keep(self, spark: Any, stage: StageJob, df: Any) -> None:
        self._frames[stage.name] = df

    def take(self, spark: Any, producer: str) -> Any:
        return self._frames[producer]

    def report(self, spark: Any, stage: StageJob) -> spark_status.StageTaskReport | None:
        return spark_status.collect(spark, stage.name)

    def explain(self, stage: StageJob, exc: BaseException) -> str | None:
        return None

    def storage_options(self, spark: Any, location: str) -> dict[str, Any]:
        return storage_options(spark, location)  # a classic driver's conf holds the secrets too


def main(argv: list[str]) -> int:
    # Die with the JVM that started this driver (spark-submit's PythonRunner): a JVM killed with SIGKILL
    # (itself bound to the Airflow task, see spark.process) must not leave this process running the stages.
    die_with_parent_jvm()
    if len(argv) != 2:
        print(f"usage: {argv[0]} JOB_JSON", file=sys.stderr)
        return 2
    return run_region(argv[1])


def run_region(job_path: str) -> int:
    """Run the region job at ``job_path`` (a local path or a URL on the storage root) in this application."""
    from pyspark.sql import SparkSession

    # The application name comes from spark-submit (--name), which names the region's run and try.
    try:
        spark = SparkSession.builder.getOrCreate()
    except Exception as exc:  # py4j's errors are not Spark's own classes: any error here is a start that failed
        print(f"{LOG_PREFIX} {CONTEXT_DID_NOT_START}: {start_error(exc)}", file=sys.stderr)
        return CONTEXT_NOT_STARTED
    # The job lives on the storage root: reach it with the credentials Spark was given (spark.hadoop.*).
    job = RegionJob.load(job_path, storage_options=storage_options(spark, job_path))
    sessions = ClassicSessions(spark)
    names = [s.name for s in job.stages]
    print(f"{LOG_PREFIX} region {job.region}: application {sessions.application_id}, stages {names}", flush=True)
    try:
        failed = run_stages(job, sessions, status_storage=storage_options(spark, job.folder))
    finally:
        spark.stop()
    return 1 if failed else 0


def start_error(exc: BaseException) -> str:
    """The error's own line: py4j's first line only names the call (``None.org.apache...JavaSparkContext``)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    cause = next((line.removeprefix(": ") for line in lines if line.startswith(": ")), lines[0] if lines else "")
    return f"{type(exc).__name__}: {cause}"


if __name__ == "__main__":
    sys.exit(main(sys.argv))
