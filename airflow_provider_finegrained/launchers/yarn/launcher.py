"""YARN: spark-submit in client or cluster mode; status and kill through the ResourceManager's REST API
(``launchers.yarn.applications``).

In cluster mode the driver runs in the ApplicationMaster's container: spark-submit uploads the driver
program, the region job must be readable from the cluster (the storage root), and the nodes need a
Python with pyspark and this provider (``spark.archives`` with a packed environment, see
:func:`yarn_cluster_submit_request`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from airflow_provider_finegrained.capacity.request import application_master
from airflow_provider_finegrained.launchers.base import CapacityKind, LaunchHandle, LaunchSpec, LaunchStatus, LogLike
from airflow_provider_finegrained.launchers.http import HttpRequestError
from airflow_provider_finegrained.launchers.master import MasterKind
from airflow_provider_finegrained.launchers.submitting import SparkSubmitLauncher, driver_program
from airflow_provider_finegrained.launchers.yarn.applications import (
    LOG_TAIL_BYTES,
    am_container_log_tail,
    kill_yarn_app,
    yarn_app_page,
    yarn_app_status,
    yarn_launch_status,
)
from airflow_provider_finegrained.spark.process import SparkSubmitProcess
from airflow_provider_finegrained.spark.submit import SubmitRequest

if TYPE_CHECKING:
    from airflow_provider_finegrained.settings.cluster import ClusterSettings

APPLICATION_CONF: Mapping[str, str] = {
    # A failed driver must fail the Airflow task; a second YARN attempt would rerun the region silently.
    "spark.yarn.maxAppAttempts": "1",
    "spark.yarn.submit.waitAppCompletion": "true",
}


def yarn_cluster_submit_request(
    application: str,
    application_args: Sequence[str] = (),
    *,
    name: str | None = None,
    queue: str | None = None,
    python_archive: str | None = None,
    py_files: Sequence[str] = (),
    conf: Mapping[str, str] | None = None,
    driver_memory: str | None = None,
    env: Mapping[str, str] | None = None,
) -> SubmitRequest:
    """A YARN cluster-mode submission of a Python driver.

    spark-submit uploads local files (the application, `py_files`) to the staging directory, so local
    paths work. The nodes need a Python with pyspark and this provider: `python_archive` (a packed
    virtual environment, e.g. ``hdfs:///envs/finegrained.tar.gz``) is unpacked as ``./environment``
    in every container and used as ``spark.pyspark.python``. Paths inside `application_args` are
    passed as they are and must be readable from the cluster (use the shared storage root).
    """
    merged: dict[str, str] = dict(APPLICATION_CONF)
    if queue:
        merged["spark.yarn.queue"] = queue
    if python_archive:
        merged["spark.archives"] = f"{python_archive}#environment"
        merged["spark.pyspark.python"] = "./environment/bin/python"
    merged.update(conf or {})
    return SubmitRequest(
        application=application,
        master="yarn",
        deploy_mode="cluster",
        name=name,
        conf=merged,
        application_args=application_args,
        py_files=py_files,
        driver_memory=driver_memory,
        env=env or {},
    )


class YarnLauncher(SparkSubmitLauncher):
    """spark-submit to YARN; capacity from the ResourceManager (or declared when no RM URL is set)."""

    name = "yarn"
    kinds: frozenset[MasterKind] = frozenset({"yarn"})
    count_overhead = True
    ships_python_env = True  # YARN localizes spark.archives in every container, the driver's too

    def __init__(self, settings: ClusterSettings, log: LogLike | None = None) -> None:
        super().__init__(settings, log)
        # Without a ResourceManager URL there is nothing to ask: the connection's declared capacity counts.
        self.capacity_kind: CapacityKind = "yarn" if settings.yarn_resourcemanager_url else "declared"
        self._killed_on_rm: str | None = None

    def application_conf(self, app_name: str) -> dict[str, str]:
        return dict(APPLICATION_CONF)

    def master_container(self, conf: Mapping[str, str]) -> tuple[int, int]:
        """YARN's ApplicationMaster: the driver in cluster mode, else Spark's small executor launcher."""
        return application_master(conf, cluster_mode=self.settings.deploy_mode == "cluster")

    def request(self, spec: LaunchSpec) -> SubmitRequest:
        if self.settings.deploy_mode != "cluster":
            return super().request(spec)
        return yarn_cluster_submit_request(
            driver_program(), [spec.job_path], name=spec.app_name, conf=spec.conf, env=self.env(spec)
        )

    def _application_id(self) -> str | None:
        return None if self._process is None else self._process.application_id

    def status(self, handle: LaunchHandle) -> LaunchStatus:
        app_id, rm_url = self._application_id(), self.settings.yarn_resourcemanager_url
        if not app_id or not rm_url:
            return super().status(handle)
        return yarn_launch_status(yarn_app_status(rm_url, app_id), app_id)

    def kill(self, handle: LaunchHandle | None) -> str:
        # Through the ResourceManager first: YARN then records the application KILLED. Stopped first, a client-mode
        # driver unregisters from its shutdown hook and YARN shows the killed region FINISHED/SUCCEEDED.
        process = self._process
        app_id = process.application_id if process is not None else None
        if process is not None and app_id and process.returncode is None and self.settings.yarn_resourcemanager_url:
            with contextlib.suppress(HttpRequestError, ValueError):  # the process tree is stopped all the same
                self._killed_on_rm = kill_on_resource_manager(self.settings, app_id)
        return super().kill(handle)

    def kill_remote(self, handle: LaunchHandle | None, process: SparkSubmitProcess) -> str:
        app_id = process.application_id
        if self._killed_on_rm:
            return self._killed_on_rm
        if self.settings.deploy_mode != "cluster":
            return "spark-submit and its driver were stopped (YARN ends the application with its driver)"
        if not app_id:
            return "spark-submit was stopped before YARN named the application"
        return kill_on_resource_manager(self.settings, app_id)

    def driver_log(self, handle: LaunchHandle) -> str | None:
        """Where YARN keeps the driver's log: the AM container's page and the aggregated-log command."""
        app_id, rm_url = self._application_id(), self.settings.yarn_resourcemanager_url
        if not app_id:
            return None
        lines = [f"YARN aggregated logs: yarn logs -applicationId {app_id}"]
        if rm_url:
            lines.append(f"YARN application page: {yarn_app_page(rm_url, app_id)}")
            try:
                app = yarn_app_status(rm_url, app_id)
            except (HttpRequestError, ValueError) as exc:
                lines.append(f"the ResourceManager did not say more: {exc}")
            else:
                if app.am_container_logs:
                    lines.append(f"driver (ApplicationMaster) log: {app.am_container_logs}")
                if app.diagnostics:
                    lines.append(f"YARN diagnostics: {app.diagnostics}")
            if self.settings.deploy_mode == "cluster":
                # The driver ran in the ApplicationMaster's container: its own last words, not only where they are.
                # PythonRunner sends the Python driver's output (a traceback too) to stdout; Spark logs to stderr.
                for name in ("stdout", "stderr"):
                    try:
                        tail = am_container_log_tail(rm_url, app_id, name, LOG_TAIL_BYTES // 2)
                    except (HttpRequestError, ValueError, KeyError) as exc:
                        lines.append(f"the driver's {name} could not be read from its NodeManager: {exc}")
                    else:
                        lines.append(f"driver {name} (last {LOG_TAIL_BYTES // 2048} KiB, from its NodeManager):")
                        lines.extend(tail.splitlines())
        return "\n".join(lines)

    def cluster_app_url(self, application_id: str) -> str | None:
        rm_url = self.settings.yarn_resourcemanager_url
        return yarn_app_page(rm_url, application_id) if rm_url else None


def kill_on_resource_manager(settings: ClusterSettings, app_id: str) -> str:
    """Ask the connection's ResourceManager to kill `app_id`; without one, say how to do it by hand."""
    rm_url = settings.yarn_resourcemanager_url
    if not rm_url:
        return (
            f"YARN application {app_id} may still run: set yarn_resourcemanager_url so it can be killed "
            f"from here, or run `yarn application -kill {app_id}`"
        )
    return f"YARN application {app_id}: {kill_yarn_app(rm_url, app_id)}"


def follow_status(settings: ClusterSettings, handle: LaunchHandle) -> LaunchStatus:
    """The state of the application `handle` names, from the ResourceManager (``launchers.remote``)."""
    app_id, rm_url = handle.application_id, settings.yarn_resourcemanager_url
    assert app_id is not None  # RemoteApplication checked handle.identified()
    if not rm_url:
        return LaunchStatus("unknown", app_id, None, "no ResourceManager to ask (set yarn_resourcemanager_url)")
    return yarn_launch_status(yarn_app_status(rm_url, app_id), app_id)


def kill_followed(settings: ClusterSettings, handle: LaunchHandle) -> str:
    """Kill the application `handle` names on the ResourceManager (``launchers.remote``)."""
    assert handle.application_id is not None  # RemoteApplication checked handle.identified()
    return kill_on_resource_manager(settings, handle.application_id)
