"""The warm pool: a region's stages run as Spark Connect sessions in a running server (no JVM start).

Wraps ``runtime/connect_region.py``: ``submit`` opens nothing yet, ``wait`` runs the region's stages in
the pool (holding a lease so the pool is not stopped under it), ``kill`` interrupts this region's
session only (the pool and other regions go on).
"""

from __future__ import annotations

import logging
import threading
import time
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

if TYPE_CHECKING:
    from airflow_provider_finegrained.hooks.settings import ConnectionSettings
    from airflow_provider_finegrained.runtime.connect_region import ConnectSessions
    from airflow_provider_finegrained.warm import WarmPool


class WarmLauncher:
    """A region run inside a warm pool's running application."""

    name = "warm"
    kinds: frozenset[MasterKind] = frozenset({"local", "local-cluster", "standalone", "yarn", "k8s"})
    capacity_kind: CapacityKind = "none"  # the pool's executors are already running: nothing to declare
    count_overhead = True

    def __init__(self, settings: ConnectionSettings, pool: WarmPool, log: LogLike | None = None) -> None:
        self.settings = settings
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
        self._result: LaunchResult | None = None

    def application_conf(self, app_name: str) -> dict[str, str]:
        return {}  # a warm region runs with the pool's application settings; only its session settings are its own

    def submit(self, spec: LaunchSpec, events: LaunchEvents | None = None) -> LaunchHandle:
        with self._lock:
            if self._killed:
                raise LaunchCancelled(f"region {spec.region} was killed before it started")
            self._spec, self._events = spec, events or LaunchEvents()
        self.log.info("Region %s runs warm in %s", spec.region, self.pool.url)
        return LaunchHandle(self.name, spec.app_name, self.pool.url)

    def wait(self, handle: LaunchHandle) -> LaunchResult:
        from airflow_provider_finegrained.runtime.connect_region import ConnectSessions, run_region_warm
        from airflow_provider_finegrained.runtime.job import RegionJob
        from airflow_provider_finegrained.warm import in_use

        if self._spec is None:
            raise RuntimeError("warm launcher: nothing was submitted")
        job = RegionJob.load(self._spec.job_path)
        sessions = ConnectSessions(self.pool.url, self.pool.ui_url, token=self.pool.token)
        with self._lock:
            if self._killed:
                raise LaunchCancelled(f"region {self._spec.region} was killed before it started")
            self._sessions = sessions
        clock = time.perf_counter()
        with in_use(self.pool) as lease:
            # Each session is on the lease before it runs: if this process dies, the pool stops them.
            sessions.on_session = lease.record_session
            failed = run_region_warm(job, sessions)
        application_id = sessions.application_id or self.pool.application_id
        if application_id:
            self._events.on_application(application_id)
        self._result = LaunchResult(
            returncode=1 if failed else 0,
            application_id=application_id,
            duration_s=time.perf_counter() - clock,
            killed=self._killed,
            sessions=dict(sessions.session_ids),
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
            sessions = self._sessions
        if sessions is None:
            return "nothing was started in the pool"
        sessions.interrupt()  # this region's session only: the pool and other regions go on
        return f"interrupted the region's session in {self.pool.url}"

    def driver_log(self, handle: LaunchHandle) -> str | None:
        return None  # the pool's server logs to its own folder; each stage's error is in its status

    def ui_links(self, application_id: str | None, driver_ui_url: str | None = None) -> SparkUITargets:
        return ui_targets(application_id, driver_ui_url or self.pool.ui_url, None, self.settings.history_server_url)
