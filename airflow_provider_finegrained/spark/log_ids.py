"""Spark's application and driver ids, as they appear in spark-submit's output lines."""

from __future__ import annotations

import re

# Spark's ids, as they appear in its log lines: local mode (`local-<epoch ms>`, logged only when
# the event log is on, as `…/eventlog_v2_local-<ms>`, or when the driver prints it), standalone
# (`app-<yyyyMMddHHmmss>-<n>`), YARN (`application_<cluster ts>_<n>`), Kubernetes
# (`spark-<32 hex>`), standalone cluster-mode driver (`driver-<yyyyMMddHHmmss>-<n>`).
_BEFORE = r"(?<![A-Za-z0-9-])"  # `_` may precede: Spark names event logs `eventlog_v2_<app id>`
_AFTER = r"(?![A-Za-z0-9_-])"
_APP_ID_RE = re.compile(
    rf"{_BEFORE}(local-\d{{10,}}|app-\d{{14}}-\d{{4,}}|application_\d{{10,}}_\d{{4,}}|spark-[0-9a-f]{{32}}){_AFTER}"
)
_DRIVER_ID_RE = re.compile(rf"{_BEFORE}(driver-\d{{14}}-\d{{4,}}){_AFTER}")

_YARN_SUBMITTED_RE = re.compile(r"(?:Submitted application|Application report for) (application_\d{10,}_\d{4,})\b")


def find_application_id(line: str) -> str | None:
    """Return the Spark application id in a log line, if any.

    A YARN id counts only once the application is submitted: Spark's client names it first ("Application ID
    is assigned") and then uploads the application's files, and a spark-submit that dies in between leaves
    nothing on the cluster to follow, kill or reattach to (measured on a real ResourceManager).
    """
    match = _APP_ID_RE.search(line)
    if match is None:
        return None
    if match.group(1).startswith("application_"):
        submitted = _YARN_SUBMITTED_RE.search(line)
        return submitted.group(1) if submitted else None
    return match.group(1)


def find_driver_id(line: str) -> str | None:
    """Return a standalone cluster-mode driver id (`driver-…`) in a log line, if any."""
    match = _DRIVER_ID_RE.search(line)
    return match.group(1) if match else None
