"""YARN: spark-submit in client or cluster mode, status and kill through the ResourceManager's REST API.

YARN does not run here: the requests are exact (tests check them against a local server speaking the RM's
REST shapes) and the answers are parsed as Hadoop documents them. In cluster mode the driver runs in the
ApplicationMaster's container: spark-submit uploads the driver program, the region job must be readable
from the cluster (the storage root), and the nodes need a Python with pyspark and this provider
(``spark.archives`` with a packed environment, see :func:`yarn_cluster_submit_request`).
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_finegrained.launchers.base import (
    CapacityKind,
    LaunchHandle,
    LaunchSpec,
    LaunchState,
    LaunchStatus,
    LogLike,
)
from airflow_provider_finegrained.launchers.http import HttpRequest, HttpRequestError, HttpResponse, send
from airflow_provider_finegrained.launchers.links import quote
from airflow_provider_finegrained.launchers.master import MasterKind
from airflow_provider_finegrained.launchers.submitting import SparkSubmitLauncher, driver_program
from airflow_provider_finegrained.spark.process import SparkSubmitProcess
from airflow_provider_finegrained.spark.submit import SubmitRequest

if TYPE_CHECKING:
    from airflow_provider_finegrained.hooks.settings import ConnectionSettings

YARN_APP_STATES = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING", "FINISHED", "FAILED", "KILLED")
YARN_FINAL_STATES = frozenset({"FINISHED", "FAILED", "KILLED"})
YARN_FINAL_STATUSES = ("UNDEFINED", "SUCCEEDED", "FAILED", "KILLED")
_YARN_APP_ID_RE = re.compile(r"application_\d+_\d+")


@dataclass(frozen=True)
class YarnAppStatus:
    """What the ResourceManager reports about one application (``GET /ws/v1/cluster/apps/{id}``)."""

    app_id: str
    state: str
    final_status: str
    diagnostics: str = ""
    tracking_url: str | None = None
    am_container_logs: str | None = None
    """The ApplicationMaster container's log page on its NodeManager (the driver's log in cluster mode)."""

    @property
    def done(self) -> bool:
        return self.state in YARN_FINAL_STATES

    @property
    def succeeded(self) -> bool:
        # A Spark driver that raised still ends in state FINISHED; only finalStatus tells failure apart.
        return self.state == "FINISHED" and self.final_status == "SUCCEEDED"


def _yarn_app_url(rm_url: str, app_id: str) -> str:
    if not _YARN_APP_ID_RE.fullmatch(app_id):
        raise ValueError(f"app_id: {app_id!r} is not a YARN application id; allowed: application_<cluster ts>_<n>")
    scheme = urllib.parse.urlsplit(rm_url).scheme
    if scheme not in ("http", "https"):
        raise ValueError(f"rm_url: {rm_url!r} must be the ResourceManager web address, http:// or https://")
    return f"{rm_url.rstrip('/')}/ws/v1/cluster/apps/{app_id}"


def _with_user(url: str, user: str | None) -> str:
    # Without Kerberos, the RM's pseudo authentication takes the caller from `user.name`.
    return url if user is None else f"{url}?{urllib.parse.urlencode({'user.name': user})}"


def yarn_status_request(rm_url: str, app_id: str, user: str | None = None) -> HttpRequest:
    """``GET {rm}/ws/v1/cluster/apps/{app_id}`` asking for JSON."""
    return HttpRequest("GET", _with_user(_yarn_app_url(rm_url, app_id), user), headers={"Accept": "application/json"})


def yarn_kill_request(rm_url: str, app_id: str, user: str | None = None) -> HttpRequest:
    """``PUT {rm}/ws/v1/cluster/apps/{app_id}/state`` with ``{"state": "KILLED"}``.

    The RM answers 202 Accepted (with the current state) while the kill is in progress and 200 with
    ``{"state": "KILLED"}`` once it is done; repeat the request, or poll the status, until then.
    """
    return HttpRequest(
        "PUT",
        _with_user(_yarn_app_url(rm_url, app_id) + "/state", user),
        body=json.dumps({"state": "KILLED"}),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )


def parse_yarn_app_status(payload: str | Mapping[str, Any]) -> YarnAppStatus:
    """Parse the ``{"app": {...}}`` answer of the Cluster Application API."""
    data = json.loads(payload) if isinstance(payload, str) else payload
    app = data.get("app") if isinstance(data, Mapping) else None
    if not isinstance(app, Mapping) or "id" not in app or "state" not in app:
        raise ValueError(f"not a YARN application answer (expected {{'app': {{'id', 'state', ...}}}}): {data!r:.300}")
    state = str(app["state"])
    if state not in YARN_APP_STATES:
        raise ValueError(f"unknown YARN application state {state!r}; known: {', '.join(YARN_APP_STATES)}")
    return YarnAppStatus(
        app_id=str(app["id"]),
        state=state,
        final_status=str(app.get("finalStatus", "UNDEFINED")),
        diagnostics=str(app.get("diagnostics") or ""),
        tracking_url=app.get("trackingUrl") or None,
        am_container_logs=app.get("amContainerLogs") or None,
    )


def parse_yarn_kill_answer(response: HttpResponse) -> str:
    """The application state in an answer to `yarn_kill_request` (``KILLED`` once the kill is done)."""
    if response.status not in (200, 202):
        raise HttpRequestError(f"YARN refused the kill (HTTP {response.status}): {response.body[:300]}")
    return str(response.json()["state"])


def yarn_app_status(rm_url: str, app_id: str, user: str | None = None, timeout_s: float = 10.0) -> YarnAppStatus:
    """Ask the ResourceManager for an application's state."""
    response = send(yarn_status_request(rm_url, app_id, user), timeout_s)
    if response.status != 200:
        raise HttpRequestError(f"YARN status of {app_id} answered HTTP {response.status}: {response.body[:300]}")
    return parse_yarn_app_status(response.body)


def kill_yarn_app(rm_url: str, app_id: str, user: str | None = None, timeout_s: float = 10.0) -> str:
    """Send the kill request once; return the state the RM reports (``KILLED`` when already done)."""
    return parse_yarn_kill_answer(send(yarn_kill_request(rm_url, app_id, user), timeout_s))


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
    merged: dict[str, str] = {
        # A failed driver must fail the Airflow task; a second YARN attempt would rerun it silently.
        "spark.yarn.maxAppAttempts": "1",
        "spark.yarn.submit.waitAppCompletion": "true",
    }
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


def yarn_app_page(rm_url: str, app_id: str) -> str:
    """The ResourceManager's page of an application (``{rm}/cluster/app/{id}``)."""
    return f"{rm_url.rstrip('/')}/cluster/app/{quote(app_id)}"


class YarnLauncher(SparkSubmitLauncher):
    """spark-submit to YARN; capacity from the ResourceManager (or declared when no RM URL is set)."""

    name = "yarn"
    kinds: frozenset[MasterKind] = frozenset({"yarn"})
    count_overhead = True

    def __init__(self, settings: ConnectionSettings, log: LogLike | None = None) -> None:
        super().__init__(settings, log)
        # Without a ResourceManager URL there is nothing to ask: the connection's declared capacity counts.
        self.capacity_kind: CapacityKind = "yarn" if settings.yarn_resourcemanager_url else "declared"

    def application_conf(self, app_name: str) -> dict[str, str]:
        # A failed driver must fail the Airflow task; a second YARN attempt would rerun the region silently.
        return {"spark.yarn.maxAppAttempts": "1", "spark.yarn.submit.waitAppCompletion": "true"}

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
        app = yarn_app_status(rm_url, app_id)
        state: LaunchState
        if not app.done:
            state = "pending" if app.state in ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED") else "running"
        elif app.succeeded:
            state = "succeeded"
        else:
            state = "killed" if app.state == "KILLED" or app.final_status == "KILLED" else "failed"
        return LaunchStatus(state, app_id, None, f"{app.state}/{app.final_status} {app.diagnostics}".strip())

    def kill_remote(self, handle: LaunchHandle | None, process: SparkSubmitProcess) -> str:
        app_id, rm_url = process.application_id, self.settings.yarn_resourcemanager_url
        if self.settings.deploy_mode != "cluster":
            return "spark-submit and its driver were stopped (YARN ends the application with its driver)"
        if not app_id:
            return "spark-submit was stopped before YARN named the application"
        if not rm_url:
            return (
                f"YARN application {app_id} may still run: set yarn_resourcemanager_url so it can be killed "
                f"from here, or run `yarn application -kill {app_id}`"
            )
        return f"YARN application {app_id}: {kill_yarn_app(rm_url, app_id)}"

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
        return "\n".join(lines)

    def cluster_app_url(self, application_id: str) -> str | None:
        rm_url = self.settings.yarn_resourcemanager_url
        return yarn_app_page(rm_url, application_id) if rm_url else None
