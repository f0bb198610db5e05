"""The "Spark UI" extra link of every stage task: its Spark application's UI, or its history page.

Airflow 3 computes a link on the worker once the task has ended (``get_link`` in the task runner's
finalize) and stores it as an XCom under the link's ``xcom_key``; the UI reads that XCom. A region's
application runs inside its leader's ``execute``, so by then it has ended: the link goes to the
history server when the connection names one, else to the cluster manager's page of the application
(a standalone master keeps finished applications), else to the driver's own UI only while that still
serves the application (a shared, long-lived driver). While the region runs, :func:`push_live_link`
stores the live target under the same key, so the button works during the run too.

Links never carry credentials: user info in a configured URL is dropped.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from airflow.sdk import BaseOperatorLink

from airflow_provider_finegrained.launchers.http import HttpRequestError, get_json

SPARK_UI_KEY = "finegrained_spark_ui"
"""XCom of every stage: its application id and the URLs the link chooses from (:class:`SparkUITargets`)."""
PROBE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class SparkUITargets:
    """Where a stage's Spark application can be seen: live, on its cluster manager, on the history server."""

    application_id: str | None
    driver_ui_url: str | None = None
    """The driver's own UI (``spark.sparkContext.uiWebUrl``); only there while the application runs."""
    cluster_app_url: str | None = None
    """The cluster manager's page of the application (standalone master, YARN ResourceManager)."""
    history_url: str | None = None
    """The history server's page of the application (``{history}/history/{app_id}/jobs/``)."""

    def live_target(self) -> str:
        """Where to look while the application runs."""
        return self.driver_ui_url or self.cluster_app_url or self.history_url or ""

    def ended_target(self, probe: bool = True) -> str:
        """Where to look once the task has ended: the driver UI only if it still serves this application."""
        if self.driver_ui_url and probe and self.application_id and serves(self.driver_ui_url, self.application_id):
            return self.driver_ui_url
        return self.history_url or self.cluster_app_url or ""

    def to_xcom(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_xcom(cls, value: Any) -> SparkUITargets | None:
        if not isinstance(value, Mapping):
            return None
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in value.items() if k in known})


def spark_ui_targets(settings: Any, application_id: str | None, driver_ui_url: str | None = None) -> SparkUITargets:
    """The targets of an application under a connection's settings (``ConnectionSettings``)."""
    if not application_id:
        return SparkUITargets(None, _public(driver_ui_url))
    app = urllib.parse.quote(application_id, safe="")
    cluster_app_url = None
    if settings.master_kind == "standalone":
        json_urls = settings.webui_json_urls()
        if json_urls:
            base = json_urls[0].rstrip("/").removesuffix("/json")
            cluster_app_url = f"{_public(base)}/app/?appId={app}"
    elif settings.master_kind == "yarn" and settings.yarn_resourcemanager_url:
        cluster_app_url = f"{_public(settings.yarn_resourcemanager_url)}/cluster/app/{app}"
    history_url = None
    if settings.history_server_url:
        history_url = f"{_public(settings.history_server_url)}/history/{app}/jobs/"
    return SparkUITargets(application_id, _public(driver_ui_url), cluster_app_url, history_url)


def serves(ui_url: str, application_id: str) -> bool:
    """Whether the Spark UI at ``ui_url`` answers for ``application_id`` (a later application may hold the port)."""
    url = f"{ui_url.rstrip('/')}/api/v1/applications/{urllib.parse.quote(application_id, safe='')}"
    try:
        # One try: a probe that misses falls back to another link, which is better than waiting on retries.
        answer = get_json(url, PROBE_TIMEOUT_S, retries=0)
    except HttpRequestError:
        return False
    return isinstance(answer, Mapping) and answer.get("id") == application_id


def _public(url: str | None) -> str | None:
    """The URL without user info and trailing slash: a link is shown to everyone who sees the task."""
    if not url:
        return None
    parts = urllib.parse.urlsplit(url.rstrip("/"))
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


class SparkUILink(BaseOperatorLink):
    """The stage's Spark application: its history page once ended (or its cluster manager's page)."""

    name = "Spark UI"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        from airflow.sdk.execution_time.xcom import XCom

        targets = SparkUITargets.from_xcom(XCom.get_value(ti_key=ti_key, key=SPARK_UI_KEY))
        return targets.ended_target() if targets is not None else ""


def push_live_link(ti: Any, targets: SparkUITargets) -> None:
    """Store the live target as the link's XCom while the application runs (finalize replaces it)."""
    ti.xcom_push(key=SPARK_UI_KEY, value=targets.to_xcom())
    link = targets.live_target()
    if link:
        ti.xcom_push(key=SparkUILink().xcom_key, value=link)


# Spark 4.3 logs "Start Jetty 127.0.0.1:4040 for SparkUI" at INFO; older releases "Bound SparkUI to ..., and
# started at http://...".
_JETTY_UI = re.compile(r"Start Jetty (?P<host>\S+):(?P<port>\d+) for SparkUI\b")
_BOUND_UI = re.compile(r"Bound SparkUI to \S+, and started at (?P<url>https?://\S+)")
_ANY_ADDRESS = ("0.0.0.0", "[::]", "::")


def driver_ui_from_line(line: str) -> str | None:
    """The driver UI's address from spark-submit's output, when the line names one that others can reach."""
    if match := _BOUND_UI.search(line):
        return match.group("url")
    match = _JETTY_UI.search(line)
    if match is None or match.group("host") in _ANY_ADDRESS:
        return None  # bound to every interface: the line does not say which name reaches it
    return f"http://{match.group('host')}:{match.group('port')}"


class LiveLink:
    """Follows spark-submit's output and stores the live Spark UI link as soon as the application is known.

    ``on_line`` for every output line, ``on_application`` for the id; both in the task's own thread.
    """

    def __init__(self, ti: Any, settings: Any) -> None:
        self.ti = ti
        self.settings = settings
        self.application_id: str | None = None
        self.driver_ui_url: str | None = None

    def on_line(self, line: str) -> None:
        ui = driver_ui_from_line(line)
        if ui and ui != self.driver_ui_url:
            self.driver_ui_url = ui
            self._push()

    def on_application(self, application_id: str) -> None:
        if application_id != self.application_id:
            self.application_id = application_id
            self._push()

    def _push(self) -> None:
        if self.application_id:
            push_live_link(self.ti, spark_ui_targets(self.settings, self.application_id, self.driver_ui_url))
