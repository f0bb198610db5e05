"""Run a region in a warm pool: each stage in its own Spark Connect session, no JVM started.

The region's stages run in this process (the leader's Airflow task) as Spark Connect clients of a
long-lived server. Each stage gets a fresh session with its own settings; a stage the region reads in
memory is kept as a global temporary view (shared by the server's sessions, over the same cached
data) and dropped when the region ends. Killing the task interrupts the running stage's operations
only: the pool and other sessions keep running. Each session is reported (``on_session``) before it
runs anything, so the pool can interrupt it if this process dies without a word (SIGKILL).
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from airflow_provider_finegrained.runtime import spark_status
from airflow_provider_finegrained.runtime.job import RegionJob, StageJob
from airflow_provider_finegrained.runtime.progress import connect_progress_lines
from airflow_provider_finegrained.runtime.region_loop import run_stages, storage_options
from airflow_provider_finegrained.runtime.spark_status import StageTaskReport
from airflow_provider_finegrained.spark.submit import CONNECT_TOKEN_ENV, connect_client_env_restored
from airflow_provider_finegrained.storage.locations import is_local, same_store
from airflow_provider_finegrained.warm.auth import client_url

SessionRecorder = Callable[[str, "str | None"], None]
"""Called with a new session's id and user id before the session runs anything (``Lease.record_session``)."""

# Spark Connect's errors for what needs the JVM of a classic driver (sparkContext, RDDs).
_CLASSIC_ONLY = ("JVM_ATTRIBUTE_NOT_SUPPORTED", "NOT_IMPLEMENTED", "sparkContext", ".rdd")


class ConnectSessions:
    """Spark Connect sessions on ``url``, one per stage (see :class:`region_loop.Sessions`)."""

    def __init__(
        self,
        url: str,
        ui_url: str | None = None,
        *,
        token: str | None = None,
        on_session: SessionRecorder | None = None,
        storage_root: str | None = None,
        storage_options: Mapping[str, Any] | None = None,
    ) -> None:
        self.url = url  # public: what is logged
        self.ui_url = ui_url
        self._token = token  # the pool's pre-shared token; only in the URL the client connects with
        self.on_session = on_session
        # The task's fsspec options for the storage root (secrets inside): a Connect client never sees the
        # server's secret settings (Spark leaves keys matching spark.redaction.regex out of conf.get/getAll).
        self._storage_root = storage_root
        self._storage_options = None if storage_options is None else dict(storage_options)
        self.application_id = ""
        self.session_ids: dict[str, str] = {}
        self._views: dict[str, str] = {}
        self._prefix = f"fg_{uuid.uuid4().hex[:12]}"
        self._current: Any = None
        self._lock = threading.Lock()
        self._interrupted = False

    def open(self, stage: StageJob) -> Any:
        with self._lock:
            if self._interrupted:
                raise InterruptedError(f"stage {stage.name!r} not started: the region's task was killed")
            spark: Any = self._session()
            self._current = spark
        self.session_ids[stage.name] = spark.session_id
        if not self.application_id:
            self.application_id = str(spark.conf.get("spark.app.id"))
        return spark

    @property
    def authenticated(self) -> bool:
        return self._token is not None

    def _session(self) -> Any:
        """A new Connect session, recorded before it runs anything (its first request creates it)."""
        from pyspark.sql import SparkSession

        spark: Any = SparkSession.builder.remote(client_url(self.url, self._token)).create()
        if self.on_session is not None:
            try:
                # pyspark keeps the user id it sends on its client only; the pool needs it to address the session.
                self.on_session(spark.session_id, getattr(spark.client, "_user_id", None))
            except BaseException:
                spark.stop()
                raise
        return spark

    def close(self, spark: Any, stage: StageJob) -> None:
        with self._lock:
            self._current = None
        spark.stop()  # releases the session on the server; the pool keeps running

    @contextlib.contextmanager
    def scope(self, spark: Any, job: RegionJob, stage: StageJob, log: Callable[[str], None]) -> Iterator[None]:
        spark.addTag(f"finegrained-{job.region}-{stage.name}")
        log(f"runs in warm pool {self.url} (session {spark.session_id})")
        with connect_progress_lines(spark, log):
            yield

    def keep(self, spark: Any, stage: StageJob, df: Any) -> None:
        view = f"{self._prefix}_{len(self._views)}"
        df.createOrReplaceGlobalTempView(view)
        self._views[stage.name] = view

    def take(self, spark: Any, producer: str) -> Any:
        return spark.table(f"global_temp.{self._views[producer]}")

    def report(self, spark: Any, stage: StageJob) -> StageTaskReport | None:
        if not self.ui_url or not self.application_id:
            return None
        return spark_status.collect_session(self.ui_url, self.application_id, spark.session_id)

    def explain(self, stage: StageJob, exc: BaseException) -> str | None:
        text = f"{type(exc).__name__}: {exc}"
        if not any(marker in text for marker in _CLASSIC_ONLY):
            return None
        return (
            f"stage {stage.name!r} uses an API that Spark Connect cannot run (SparkContext, RDDs): {text}; "
            f"run this stage cold: give it warm=False (or set warm_pool 'off' on the connection)"
        )

    def storage_options(self, spark: Any, location: str) -> dict[str, Any]:
        """fsspec options for ``location``: the task's for a location on the storage root, else those the
        server's public ``spark.hadoop.*`` settings give (a session is opened for it when ``spark`` is None)."""
        if is_local(location):
            return {}
        root = self._storage_root
        if self._storage_options is not None and root is not None and same_store(location, root):
            return dict(self._storage_options)
        if spark is not None:
            return storage_options(spark, location)
        session = self._session()
        try:
            return storage_options(session, location)
        finally:
            session.stop()

    def interrupt(self) -> None:
        """Cancel the running stage's Spark jobs; no further stage starts."""
        with self._lock:
            self._interrupted = True
            current = self._current
        if current is not None:
            current.interruptAll()

    def finish(self) -> None:
        """Drop the region's in-memory handovers from the server."""
        if not self._views:
            return
        spark = self._session()
        try:
            for view in self._views.values():
                with contextlib.suppress(Exception):  # a view already gone is what we want
                    spark.table(f"global_temp.{view}").unpersist()
                spark.catalog.dropGlobalTempView(view)
        finally:
            spark.stop()
            self._views.clear()


def run_region_warm(job: RegionJob, sessions: ConnectSessions) -> str | None:
    """Run ``job``'s stages in the pool; the stage that failed, or None.

    The statuses go to the job's folder with the storage root's options (:meth:`ConnectSessions.storage_options`).
    """
    # With the pool's token in the URL, a token some other code left in the environment must not matter.
    with connect_client_env_restored(unset=CONNECT_TOKEN_ENV if sessions.authenticated else ()):
        try:
            return run_stages(job, sessions, status_storage=sessions.storage_options(None, job.folder))
        finally:
            sessions.finish()
