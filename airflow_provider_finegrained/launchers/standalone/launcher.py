"""``spark://`` masters: client mode, and cluster mode with the driver on a worker.

A Python driver in cluster mode is launched through Spark's PythonRunner under
``spark/standalone_driver.py`` (Spark refuses ``--deploy-mode cluster`` for ``.py`` files on standalone);
stopping it needs the master's kill request, since killing spark-submit leaves the driver running.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING

from airflow_provider_finegrained.launchers.base import (
    CapacityKind,
    LaunchHandle,
    LaunchSpec,
    LaunchState,
    LaunchStatus,
)
from airflow_provider_finegrained.launchers.links import quote
from airflow_provider_finegrained.launchers.master import MasterKind
from airflow_provider_finegrained.launchers.standalone.client import driver_state, kill_detached, read_driver_log
from airflow_provider_finegrained.launchers.submitting import SparkSubmitLauncher
from airflow_provider_finegrained.planning.units import parse_bytes
from airflow_provider_finegrained.spark.java import SPARK_MODULE_OPTIONS
from airflow_provider_finegrained.spark.process import SparkSubmitProcess
from airflow_provider_finegrained.spark.submit import SubmitRequest, python_runner_jar, standalone_driver_path
from airflow_provider_finegrained.storage import filesystem
from airflow_provider_finegrained.storage.locations import is_local, join, parent

if TYPE_CHECKING:
    from airflow_provider_finegrained.settings.cluster import ClusterSettings

DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
PROGRAM_FOLDER = "program"
"""Inside a region's folder on the storage root: the files a cluster-mode driver starts from."""

DRIVER_LOG_BYTES = 64 * 1024

STANDALONE_DRIVER_STATES: dict[str, LaunchState] = {
    "SUBMITTED": "pending",
    "RELAUNCHING": "pending",
    "RUNNING": "running",
    "FINISHED": "succeeded",
    "FAILED": "failed",
    "ERROR": "failed",
    "KILLED": "killed",
    "UNKNOWN": "unknown",
}
"""A standalone driver's state (``DriverState``) as a launch state."""


class StandaloneLauncher(SparkSubmitLauncher):
    """spark-submit to a standalone master; free capacity from the master's ``/json/``."""

    name = "standalone"
    kinds: frozenset[MasterKind] = frozenset({"standalone"})
    capacity_kind: CapacityKind = "standalone"
    # A standalone master books only spark.executor.memory (and off-heap) against a worker's memory.
    count_overhead = False

    def master_container(self, conf: Mapping[str, str]) -> tuple[int, int]:
        """A cluster-mode driver: it runs on a worker, which books ``spark.driver.cores`` (1) and
        ``spark.driver.memory`` (1 GiB, no overhead) for it; nothing in client mode.

        Counted so that the capacity gate never admits regions whose drivers take the cores their executors
        need: two such regions on two one-core workers would each hold a core and wait for executors forever.
        """
        if self.settings.deploy_mode != "cluster":
            return (0, 0)
        cores = conf.get("spark.driver.cores", "1")
        if not cores.isdigit() or int(cores) < 1:
            raise ValueError(f"spark.driver.cores: {cores!r}; allowed: a whole number of at least 1")
        return int(cores), parse_bytes(conf.get("spark.driver.memory", "1g"), what="spark.driver.memory")

    def request(self, spec: LaunchSpec) -> SubmitRequest:
        """In cluster mode the driver runs on a worker, which must not read the Airflow worker's disk: the
        programs it starts from travel with the region job on the storage root (PythonRunner takes local
        files only, so this needs a root every worker mounts; any other root keeps this installation's paths,
        which the workers' installation must then match)."""
        request = super().request(spec)
        if self.settings.deploy_mode != "cluster":
            return request
        request = dataclasses.replace(request, conf=with_module_options(request.conf))
        # The job is on the storage root: a local job path means a local root.
        if not is_local(spec.job_path):
            return request
        folder = join(parent(spec.job_path), PROGRAM_FOLDER)
        shipped = {
            source: join(folder, os.path.basename(source))
            for source in (request.application, standalone_driver_path(), python_runner_jar(self.settings.spark_home))
        }
        for source, target in shipped.items():
            with open(source, "rb") as handle:
                filesystem.write_bytes(target, handle.read())
        application, wrapper, jar = shipped.values()
        return dataclasses.replace(request, application=application, driver_wrapper=wrapper, primary_jar=jar)

    def _json_url(self) -> str | None:
        urls = self.settings.webui_json_urls()
        return urls[0] if urls else None

    def _driver_id(self) -> str | None:
        return None if self._process is None else self._process.driver_id

    def kill_remote(self, handle: LaunchHandle | None, process: SparkSubmitProcess) -> str:
        if self.settings.deploy_mode != "cluster":
            return "spark-submit and its driver were stopped"
        driver_id = process.driver_id
        if not driver_id:
            return "spark-submit was stopped before the master named a driver"
        return kill_on_master(self.settings, driver_id)

    def driver_log(self, handle: LaunchHandle) -> str | None:
        """In cluster mode the driver's stderr from its worker (spark-submit's output does not hold it)."""
        driver_id, json_url = self._driver_id(), self._json_url()
        if self.settings.deploy_mode != "cluster" or not driver_id or not json_url:
            return None
        text = read_driver_log(json_url, driver_id, "stderr", max_bytes=DRIVER_LOG_BYTES)
        return f"driver {driver_id} stderr (last {DRIVER_LOG_BYTES // 1024} KiB):\n{text}"

    def cluster_app_url(self, application_id: str) -> str | None:
        json_url = self._json_url()
        if not json_url:
            return None
        base = json_url.rstrip("/").removesuffix("/json")
        return f"{base}/app/?appId={quote(application_id)}"


def with_module_options(conf: Mapping[str, str]) -> dict[str, str]:
    """``conf`` with Spark's Java 17 module options first in ``spark.driver.extraJavaOptions``.

    A standalone worker starts a cluster-mode driver with ``spark.driver.extraJavaOptions`` alone, not with
    what Spark's launcher gives the JVMs it starts, so the first date a driver read on the rehearsal failed
    (``sun.util.calendar.ZoneInfo`` is not accessible). The user's own options come after, and win.
    """
    own = conf.get(DRIVER_JAVA_OPTIONS, "").strip()
    return {**conf, DRIVER_JAVA_OPTIONS: " ".join([*SPARK_MODULE_OPTIONS, *([own] if own else [])])}


def kill_on_master(settings: ClusterSettings, driver_id: str) -> str:
    """Kill a cluster-mode driver through the connection's first master; say how it ended.

    The kill outlives this process (:func:`~.client.kill_detached`): Airflow may SIGKILL a stopped task first.
    """
    urls = settings.webui_json_urls()
    state = kill_detached(
        settings.master.split(",")[0],
        driver_id,
        spark_home=settings.spark_home,
        webui_json_url=urls[0] if urls else None,
    )
    return f"Driver {driver_id} on {settings.master} ended: {state}"


def follow_status(settings: ClusterSettings, handle: LaunchHandle) -> LaunchStatus:
    """The state of the driver `handle` names, from the master's ``/json/`` (``launchers.remote``)."""
    driver_id = handle.driver_id
    assert driver_id is not None  # RemoteApplication checked handle.identified()
    urls = settings.webui_json_urls()
    if not urls:
        return LaunchStatus("unknown", None, driver_id, "no master web UI to ask (set master_webui_url)")
    found = driver_state(urls[0], driver_id)
    if found is None:
        return LaunchStatus("unknown", None, driver_id, f"the master at {urls[0]} does not know {driver_id}")
    state = STANDALONE_DRIVER_STATES.get(found, "unknown")
    return LaunchStatus(state, handle.application_id, driver_id, f"driver {driver_id} is {found}")


def kill_followed(settings: ClusterSettings, handle: LaunchHandle) -> str:
    """Kill the driver `handle` names through the master (``launchers.remote``)."""
    assert handle.driver_id is not None  # RemoteApplication checked handle.identified()
    return kill_on_master(settings, handle.driver_id)
