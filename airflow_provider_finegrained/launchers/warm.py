"""The warm pool: a region's stages run as Spark Connect sessions in a running server (no JVM start).

Wraps ``runtime/connect_region.py``: ``submit`` opens nothing yet, ``wait`` runs the region's stages in
the pool (holding a lease so the pool is not stopped under it), ``kill`` interrupts this region's
session only (the pool and other regions go on). The stages run in the pool's ready region driver
(``warm/region_driver.py``: pyspark's Connect client already imported) when it listens, else in this
task process, which then pays the client's import (seconds; the task log says so).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING

from airflow_provider_finegrained.launchers.base import (
    CapacityKind,
    LaunchCancelled,
    LaunchEvents,
    LaunchHandle,
    LaunchResult,
    LaunchSpec,
    LaunchState,
    LaunchStatus,
    LogLike,
)
from airflow_provider_finegrained.launchers.links import SparkUITargets, ui_targets
from airflow_provider_finegrained.launchers.master import MasterKind
from airflow_provider_finegrained.settings.cluster import ClusterSettings

if TYPE_CHECKING:
    from airflow_provider_finegrained.runtime.connect_region import ConnectSessions
    from airflow_provider_finegrained.warm import WarmPool
    from airflow_provider_finegrained.warm.driver_client import ReadyDriver, SessionRecorder


class WarmLauncher:
    """A region run inside a warm pool's running application."""

    name = "warm"
    kinds: frozenset[MasterKind] = frozenset({"local", "local-cluster", "standalone", "yarn", "k8s"})
    capacity_kind: CapacityKind = "none"  # the pool's executors are already running: nothing to declare
    count_overhead = True
    ships_python_env = False

    def __init__(self, settings: ClusterSettings, pool: WarmPool, log: LogLike | None = None) -> None:
        self.settings = ClusterSettings.of(settings)  # the cluster concern only
        self.pool = pool
        if pool.token:
            # Defence in depth: should a client library ever echo the URL it connects with, the task log masks it.
            from airflow.sdk.log import mask_secret

            mask_secret(pool.token)
        self.log: LogLike = log or logging.getLogger(__name__)
        self._lock = threading.Lock()
        self._killed = False
        self._spec: LaunchSpec | None = None
        self._events = LaunchEvents()
        self._sessions: ConnectSessions | None = None
        self._driver: ReadyDriver | None = None
        self._result: LaunchResult | None = None

    def application_conf(self, app_name: str) -> dict[str, str]:
        return {}  # a warm region runs with the pool's application settings; only its session settings are its own

    def master_container(self, conf: Mapping[str, str]) -> tuple[int, int]:
        return (0, 0)  # nothing is started, nothing is reserved

    def submit(self, spec: LaunchSpec, events: LaunchEvents | None = None) -> LaunchHandle:
        with self._lock:
            if self._killed:
                raise LaunchCancelled(f"region {spec.region} was killed before it started")
            self._spec, self._events = spec, events or LaunchEvents()
        self.log.info("Region %s runs warm in %s", spec.region, self.pool.url)
        return LaunchHandle(self.name, spec.app_name, self.pool.url)

    def wait_named(self, handle: LaunchHandle) -> LaunchHandle:
        return handle  # a warm region's sessions are the task's own: there is nothing to name for another process

    def detach(self, handle: LaunchHandle) -> None:
        raise NotImplementedError("a warm region cannot be left running: its client is the task itself")

    def wait(self, handle: LaunchHandle) -> LaunchResult:
        from airflow_provider_finegrained.warm import in_use
        from airflow_provider_finegrained.warm.driver_client import DriverUnavailable, ReadyDriver

        if self._spec is None:
            raise RuntimeError("warm launcher: nothing was submitted")
        clock = time.perf_counter()
        with in_use(self.pool) as lease:
            # The pool's ready driver has pyspark's Connect client imported already (seconds a fresh task
            # process would spend on pandas, pyarrow and gRPC): it runs the region in a child of its own.
            try:
                driver = ReadyDriver.connect(self.pool)
            except DriverUnavailable as exc:
                self.log.info(
                    "Region %s runs in this task process: %s (importing pyspark's Connect client takes seconds)",
                    self._spec.region,
                    exc,
                )
            else:
                with self._lock:
                    killed, self._driver = self._killed, driver
                try:
                    if not killed:
                        result = self._wait_in_driver(driver, lease.record_session, clock)
                        if result is not None:
                            return result
                finally:
                    with self._lock:
                        self._driver = None
                    driver.close()
            return self._wait_in_process(lease.record_session, clock)

    def _wait_in_driver(self, driver: ReadyDriver, record: SessionRecorder, clock: float) -> LaunchResult | None:
        """The region run by the pool's ready driver; None if the driver did not take it (nothing ran)."""
        from dataclasses import asdict

        from airflow_provider_finegrained.runtime.job import RegionJob
        from airflow_provider_finegrained.warm.driver_client import DriverRefused, request_for

        assert self._spec is not None
        # The job is on the storage root: read with the options the pool's server got as spark.hadoop.*.
        job = RegionJob.load(self._spec.job_path, storage_options=self.pool.storage_options)
        try:
            child = driver.start(request_for(asdict(job), self.pool))
        except DriverRefused as exc:
            self.log.warning(
                "The warm pool's ready region driver did not take region %s (%s): it runs in this task process",
                self._spec.region,
                exc,
            )
            return None
        self.log.info("Region %s runs in the warm pool's ready region driver (child pid %d)", self._spec.region, child)
        outcome = driver.follow(record, _echo)
        if not outcome.complete:
            self.log.error("Region %s: %s", self._spec.region, outcome.error)
        return self._finish(
            failed=outcome.failed is not None or not outcome.complete,
            application_id=outcome.application_id,
            sessions=outcome.sessions,
            clock=clock,
        )

    def _wait_in_process(self, record: SessionRecorder, clock: float) -> LaunchResult:
        from airflow_provider_finegrained.runtime.connect_region import ConnectSessions, run_region_warm
        from airflow_provider_finegrained.runtime.job import RegionJob

        assert self._spec is not None
        job = RegionJob.load(self._spec.job_path, storage_options=self.pool.storage_options)
        sessions = ConnectSessions(
            self.pool.url,
            self.pool.ui_url,
            token=self.pool.token,
            storage_root=job.storage_root,
            storage_options=self.pool.storage_options,
        )
        with self._lock:
            if self._killed:
                raise LaunchCancelled(f"region {self._spec.region} was killed before it started")
            self._sessions = sessions
        # Each session is on the lease before it runs: if this process dies, the pool stops them.
        sessions.on_session = record
        failed = run_region_warm(job, sessions)
        return self._finish(
            failed=failed is not None,
            application_id=sessions.application_id,
            sessions=dict(sessions.session_ids),
            clock=clock,
        )

    def _finish(self, *, failed: bool, application_id: str, sessions: dict[str, str], clock: float) -> LaunchResult:
        application_id = application_id or self.pool.application_id or ""
        if application_id:
            self._events.on_application(application_id)
        self._result = LaunchResult(
            returncode=1 if failed else 0,
            application_id=application_id or None,
            duration_s=time.perf_counter() - clock,
            killed=self._killed,
            sessions=sessions,
        )
        return self._result

    def status(self, handle: LaunchHandle) -> LaunchStatus:
        result = self._result
        if result is None:
            state: LaunchState = "killed" if self._killed else ("running" if self._sessions else "pending")
            return LaunchStatus(state, self.pool.application_id)
        state = "killed" if result.killed else ("succeeded" if result.succeeded else "failed")
        return LaunchStatus(state, result.application_id)

    def kill(self, handle: LaunchHandle | None) -> str:
        with self._lock:
            self._killed = True
            sessions, driver = self._sessions, self._driver
        if driver is not None:
            driver.kill()  # the driver interrupts this region's session only; the stages report it
            return f"asked the ready region driver of {self.pool.url} to interrupt the region's session"
        if sessions is None:
            return "nothing was started in the pool"
        sessions.interrupt()  # this region's session only: the pool and other regions go on
        return f"interrupted the region's session in {self.pool.url}"

    def driver_log(self, handle: LaunchHandle) -> str | None:
        return None  # the pool's server logs to its own folder; each stage's error is in its status

    def ui_links(self, application_id: str | None, driver_ui_url: str | None = None) -> SparkUITargets:
        return ui_targets(application_id, driver_ui_url or self.pool.ui_url, None, self.settings.history_server_url)


def _echo(line: str) -> None:
    # The region's lines land where they would had it run here: this process's output, which Airflow logs.
    print(line, flush=True)
