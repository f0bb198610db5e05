"""One YARN application on the ResourceManager's REST API: its status and kill requests, their answers, and
what its state means as a launch state.

YARN does not run here: the requests are exact (tests check them against a local server speaking the RM's
REST shapes) and the answers are parsed as Hadoop documents them.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_finegrained.launchers.base import LaunchState, LaunchStatus
from airflow_provider_finegrained.launchers.http import HttpRequest, HttpRequestError, HttpResponse, send
from airflow_provider_finegrained.launchers.links import quote

YARN_APP_STATES = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING", "FINISHED", "FAILED", "KILLED")
YARN_FINAL_STATES = frozenset({"FINISHED", "FAILED", "KILLED"})
YARN_FINAL_STATUSES = ("UNDEFINED", "SUCCEEDED", "FAILED", "KILLED")
YARN_PENDING_STATES = frozenset({"NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED"})
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


def yarn_app_page(rm_url: str, app_id: str) -> str:
    """The ResourceManager's page of an application (``{rm}/cluster/app/{id}``)."""
    return f"{rm_url.rstrip('/')}/cluster/app/{quote(app_id)}"


LOG_TAIL_BYTES = 64 * 1024


def am_container_log_request(rm_url: str, app_id: str) -> HttpRequest:
    """``GET {rm}/ws/v1/cluster/apps/{app_id}/appattempts``: where the ApplicationMaster's container ran."""
    return HttpRequest("GET", _yarn_app_url(rm_url, app_id) + "/appattempts", headers={"Accept": "application/json"})


def am_container_log_tail(
    rm_url: str, app_id: str, filename: str = "stderr", size: int = LOG_TAIL_BYTES, timeout_s: float = 10.0
) -> str:
    """The last ``size`` bytes of the ApplicationMaster container's ``filename`` (the driver's, in cluster mode).

    From the NodeManager that ran the last attempt (``/ws/v1/node/containerlogs/{container}/{file}``), which
    serves the aggregated log once the container is gone; no ``yarn`` command is needed on this host.
    """
    answer = send(am_container_log_request(rm_url, app_id), timeout_s)
    if answer.status != 200:
        raise HttpRequestError(f"YARN attempts of {app_id} answered HTTP {answer.status}: {answer.body[:300]}")
    attempts = answer.json().get("appAttempts", {}).get("appAttempt") or []
    if not attempts:
        raise ValueError(f"YARN lists no attempt of {app_id}")
    last = attempts[-1]
    scheme = urllib.parse.urlsplit(rm_url).scheme
    url = (
        f"{scheme}://{last['nodeHttpAddress']}/ws/v1/node/containerlogs/"
        f"{quote(str(last['containerId']))}/{quote(filename)}?size=-{size}"
    )
    logs = send(HttpRequest("GET", url, headers={"Accept": "text/plain"}), timeout_s)
    if logs.status != 200:
        raise HttpRequestError(f"the NodeManager's log of {last['containerId']} answered HTTP {logs.status}")
    return logs.body


def yarn_launch_status(app: YarnAppStatus, app_id: str) -> LaunchStatus:
    """The launch status of `app` (the RM's answer about `app_id`)."""
    state: LaunchState
    if not app.done:
        state = "pending" if app.state in YARN_PENDING_STATES else "running"
    elif app.succeeded:
        state = "succeeded"
    else:
        state = "killed" if "KILLED" in (app.state, app.final_status) else "failed"
    return LaunchStatus(state, app_id, None, f"{app.state}/{app.final_status} {app.diagnostics}".strip())
