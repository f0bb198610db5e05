"""Where a Spark application can be seen: its driver's UI, its cluster manager's page, the history server.

Pure (no Airflow): each launcher fills in its cluster manager's page; ``operators/links.py`` turns the
targets into the stage's extra link. Links never carry credentials: user info in a URL is dropped.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Final

from airflow_provider_finegrained.launchers.http import HttpRequestError, get_json

PROBE_TIMEOUT_S: Final = 2.0


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


def ui_targets(
    application_id: str | None,
    driver_ui_url: str | None,
    cluster_app_url: str | None,
    history_server_url: str | None,
) -> SparkUITargets:
    """The targets of one application, every URL made public (no user info, no trailing slash)."""
    if not application_id:
        return SparkUITargets(None, public_url(driver_ui_url))
    history_url = None
    if history_server_url:
        history_url = f"{public_url(history_server_url)}/history/{quote(application_id)}/jobs/"
    return SparkUITargets(application_id, public_url(driver_ui_url), public_url(cluster_app_url), history_url)


def quote(application_id: str) -> str:
    """An application id as one URL path segment or query value."""
    return urllib.parse.quote(application_id, safe="")


def serves(ui_url: str, application_id: str) -> bool:
    """Whether the Spark UI at ``ui_url`` answers for ``application_id`` (a later application may hold the port)."""
    url = f"{ui_url.rstrip('/')}/api/v1/applications/{quote(application_id)}"
    try:
        # One try: a probe that misses falls back to another link, which is better than waiting on retries.
        answer = get_json(url, PROBE_TIMEOUT_S, retries=0)
    except HttpRequestError:
        return False
    return isinstance(answer, Mapping) and answer.get("id") == application_id


def public_url(url: str | None) -> str | None:
    """The URL without user info and trailing slash: a link is shown to everyone who sees the task."""
    if not url:
        return None
    parts = urllib.parse.urlsplit(url.rstrip("/"))
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


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
