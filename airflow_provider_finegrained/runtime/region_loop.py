"""Run a region's stages in order and report each one, whatever carries the Spark sessions.

Two carriers implement :class:`Sessions`: the spark-submit driver (one classic SparkSession for the
whole region, :mod:`runtime.driver`) and the warm pool (one Spark Connect session per stage,
:mod:`runtime.connect_region`). Stages of the region hand their outputs to each other in memory; an
output read outside the region is committed with the atomic output protocol. Each stage's result (or
its error and traceback) goes to a status file the Airflow tasks read; after a failure the remaining
stages are reported as not run.
"""

from __future__ import annotations

import runpy
import sys
import traceback
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from typing import Any, Protocol

from airflow_provider_finegrained.runtime import api
from airflow_provider_finegrained.runtime.fence import Fence
from airflow_provider_finegrained.runtime.job import InputRef, RegionJob, StageJob, StageStatus
from airflow_provider_finegrained.runtime.output import read_committed
from airflow_provider_finegrained.runtime.output_commit import write_and_commit
from airflow_provider_finegrained.runtime.spark_status import StageTaskReport
from airflow_provider_finegrained.storage import filesystem
from airflow_provider_finegrained.storage.filesystem import StorageOptions
from airflow_provider_finegrained.storage.hadoop_conf import fsspec_options
from airflow_provider_finegrained.storage.locations import scheme_of, spark_uri

LOG_PREFIX = "[finegrained]"


class StageLog:
    """Prints a stage's lines to the output and keeps them for the stage's own Airflow task."""

    def __init__(self, stage: str) -> None:
        self.stage = stage
        self.lines: list[str] = []

    def __call__(self, message: str) -> None:
        line = f"{LOG_PREFIX} stage {self.stage}: {message}"
        self.lines.append(line)
        print(line, flush=True)


class Sessions(Protocol):
    """Where a region's stages get their Spark sessions and how they hand data over."""

    application_id: str
    ui_url: str | None

    def open(self, stage: StageJob) -> Any:
        """The session ``stage`` runs in."""

    def close(self, spark: Any, stage: StageJob) -> None:
        """``stage`` is done with ``spark``."""

    def scope(
        self, spark: Any, job: RegionJob, stage: StageJob, log: Callable[[str], None]
    ) -> AbstractContextManager[Any]:
        """Around the stage's Spark work: names its jobs, reports its progress."""

    def keep(self, spark: Any, stage: StageJob, df: Any) -> None:
        """Keep ``df`` (already persisted) for the stages of the region that read it in memory."""

    def take(self, spark: Any, producer: str) -> Any:
        """The DataFrame a stage of the region kept, in ``spark``."""

    def report(self, spark: Any, stage: StageJob) -> StageTaskReport | None:
        """Spark's report of the stage's tasks, None when unknown."""

    def explain(self, stage: StageJob, exc: BaseException) -> str | None:
        """A clearer message for an error this carrier knows, else None."""

    def storage_options(self, spark: Any, location: str) -> dict[str, Any]:
        """fsspec options for ``location`` on the Python side (see :func:`storage_options`)."""


def run_stages(job: RegionJob, sessions: Sessions, *, status_storage: StorageOptions = None) -> str | None:
    """Run every stage of ``job``; the name of the stage that failed, or None.

    ``status_storage``: fsspec options for the job's folder, where the status files go (the carrier
    derives them with :func:`storage_options`; none: fsspec's defaults, enough for a local folder).
    """
    failed: str | None = None
    for stage in job.stages:
        path = job.status_path(stage.name)
        if failed is not None:
            StageStatus(
                stage.name,
                "not_run",
                error=f"not run: stage {failed!r} of region {job.region} failed",
                application_id=sessions.application_id,
                ui_url=sessions.ui_url,
            ).write(path, storage_options=status_storage)
            continue
        status = run_stage(job, stage, sessions)
        status.write(path, storage_options=status_storage)
        if status.state != "success":
            failed = stage.name
    return failed


def run_stage(job: RegionJob, stage: StageJob, sessions: Sessions) -> StageStatus:
    log = StageLog(stage.name)
    started = _now()
    log("started")
    spark = None
    try:
        spark = sessions.open(stage)
        with sessions.scope(spark, job, stage, log), stage_settings(spark, stage.session_conf, log):
            ready = _now()
            inputs = {ref.name: _load_input(spark, ref, sessions) for ref in stage.inputs}
            result = _call_stage(spark, stage, inputs, sessions)
            _check_dataframe(stage.name, result)
            if stage.handover:
                if stage.output_location:
                    result = result.persist()  # written and read again in memory: compute once
                sessions.keep(spark, stage, result)
            output = None
            if stage.output_location:
                committed = write_and_commit(
                    result,
                    stage.output_location,
                    stage.output_format,
                    stage.write_options,
                    root=job.storage_root,
                    storage_options=sessions.storage_options(spark, stage.output_location),
                    fence=Fence.for_stage(job.storage_root, job.dag_id, job.run_id, stage.name, job.try_number),
                )
                output = committed.to_dict()
                log(f"committed {committed.rows} rows, {committed.total_bytes} bytes in {len(committed.files)} files")
            else:
                log("output handed over in memory")
        ended = _now()
        tasks = _task_report(sessions, spark, stage, log)
        log("finished")
        return StageStatus(
            stage.name,
            "success",
            output=output,
            started_at=started,
            ended_at=ended,
            ready_at=ready,
            application_id=sessions.application_id,
            ui_url=sessions.ui_url,
            log=log.lines,
            spark_tasks=tasks,
        )
    except BaseException as exc:  # every failure, even KeyboardInterrupt, is reported to the stage's task
        trace = traceback.format_exc()
        print(trace, file=sys.stderr, flush=True)
        error = sessions.explain(stage, exc) or f"{type(exc).__name__}: {exc}"
        log(f"failed: {error}")
        return StageStatus(
            stage.name,
            "failed",
            error=error,
            traceback=trace,
            started_at=started,
            ended_at=_now(),
            application_id=sessions.application_id,
            ui_url=sessions.ui_url,
            log=log.lines,
        )
    finally:
        if spark is not None:
            sessions.close(spark, stage)


@contextmanager
def stage_settings(spark: Any, conf: Mapping[str, str], log: Callable[[str], None]) -> Iterator[None]:
    """``conf`` set in ``spark``'s session while inside; after, the session's settings as they were before.

    The stages of a classic region share one session: without the restore, a key one stage sets (its
    ``spark.sql.*`` from ``spark_conf``, a scan setting only a file-reading stage gets) would stay set for
    the next stage, whose trace does not list it. Keys the stage's own code changed are restored too.
    """
    before = dict(spark.conf.getAll)
    for key, value in conf.items():
        spark.conf.set(key, value)
    try:
        yield
    finally:
        after = dict(spark.conf.getAll)
        for key in sorted(after.keys() | conf.keys()):
            if after.get(key) == before.get(key) and key not in conf:
                continue
            try:
                if key in before:
                    spark.conf.set(key, before[key])
                else:
                    spark.conf.unset(key)
            except Exception as exc:  # the stage's own result stands; the next stage's trace may not
                log(f"could not restore session setting {key}: {type(exc).__name__}: {exc}")


def _task_report(sessions: Sessions, spark: Any, stage: StageJob, log: StageLog) -> dict[str, Any] | None:
    try:
        report = sessions.report(spark, stage)
    except Exception as exc:  # a measurement must never fail the stage it measures
        log(f"could not read Spark's task report: {type(exc).__name__}: {exc}")
        return None
    if report is None:
        return None
    log(f"ran {report.total_tasks} Spark tasks on {len(report.executors)} executor(s)")
    return report.to_dict()


def storage_options(spark: Any, location: str) -> dict[str, Any]:
    """fsspec options for ``location`` from the session's ``spark.hadoop.*`` settings, so the Python side of the
    commit protocol reaches the store Spark writes to with the same credentials; empty: fsspec's defaults."""
    scheme = scheme_of(location)
    if scheme in ("file", "memory"):
        return {}
    return fsspec_options(scheme, dict(spark.conf.getAll))


def _load_input(spark: Any, ref: InputRef, sessions: Sessions) -> Any:
    if ref.source == "stage":
        df = sessions.take(spark, ref.stage or ref.name)
    elif ref.source == "committed" and ref.path:
        # Exactly the files the marker lists: never a folder listing that could hold a late try's files.
        committed = read_committed(ref.path, storage_options=sessions.storage_options(spark, ref.path))
        reader = spark.read.format(committed.format).options(**ref.options)
        df = reader.option("basePath", spark_uri(committed.data_root)).load([spark_uri(u) for u in committed.uris])
    else:
        df = spark.read.format(ref.format).options(**ref.options).load(spark_uri(ref.path) if ref.path else None)
    if ref.broadcast:
        from pyspark.sql.functions import broadcast

        df = broadcast(df)
    return df


def _call_stage(spark: Any, stage: StageJob, inputs: dict[str, Any], sessions: Sessions) -> Any:
    if stage.callable_path:
        from pyspark import cloudpickle

        pickled = filesystem.read_bytes(stage.callable_path, sessions.storage_options(spark, stage.callable_path))
        fn = cloudpickle.loads(pickled)
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
        module, name = type(value).__module__, type(value).__name__
        if name == "DataFrame" and module.startswith("pyspark.pandas"):
            raise TypeError(
                f"stage {stage!r} returned a pandas-on-Spark DataFrame, not a pyspark.sql.DataFrame; "
                "return df.to_spark()"
            )
        if name == "DataFrame" and module.partition(".")[0] == "pandas":
            raise TypeError(
                f"stage {stage!r} returned a pandas DataFrame, not a pyspark.sql.DataFrame; return "
                "spark.createDataFrame(pdf) (or build the result with Spark) so Spark writes and sizes it"
            )
        raise TypeError(
            f"stage {stage!r} returned {type(value).__name__}, not a pyspark.sql.DataFrame; "
            "a stage function must return the DataFrame to publish"
        )


def _now() -> str:
    return datetime.now(UTC).isoformat()
