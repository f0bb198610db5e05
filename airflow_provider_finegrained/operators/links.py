"""The "Spark UI" extra link of every stage task: its Spark application's UI, or its history page.

Airflow 3 computes a link on the worker once the task has ended (``get_link`` in the task runner's
finalize) and stores it as an XCom under the link's ``xcom_key``; the UI reads that XCom. A region's
application runs inside its leader's ``execute``, so by then it has ended: the link goes to the
history server when the connection names one, else to the cluster manager's page of the application
(a standalone master keeps finished applications), else to the driver's own UI only while that still
serves the application (a shared, long-lived driver). While the region runs, :func:`push_live_link`
stores the live target under the same key, so the button works during the run too.

Which page a cluster manager offers is its launcher's (``Launcher.ui_links``); links never carry
credentials: user info in a configured URL is dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from airflow.sdk import BaseOperatorLink

from airflow_provider_finegrained.launchers.links import (
    PROBE_TIMEOUT_S,
    SparkUITargets,
    driver_ui_from_line,
    public_url,
    serves,
)
from airflow_provider_finegrained.operators import xcom_writes
from airflow_provider_finegrained.operators.xcom_writes import SPARK_UI_KEY

if TYPE_CHECKING:
    from airflow_provider_finegrained.settings import ConnectionSettings

__all__ = [
    "PROBE_TIMEOUT_S",
    "SPARK_UI_KEY",
    "LiveLink",
    "SparkUILink",
    "SparkUITargets",
    "driver_ui_from_line",
    "public_url",
    "push_live_link",
    "serves",
    "spark_ui_targets",
]


UITargetsFor = Callable[[str | None, str | None], SparkUITargets]
"""``(application_id, driver_ui_url) -> SparkUITargets``: a launcher's ``ui_links``."""


def spark_ui_targets(
    settings: ConnectionSettings, application_id: str | None, driver_ui_url: str | None = None
) -> SparkUITargets:
    """The targets of an application under a connection's settings, as its cluster manager's launcher gives them."""
    from airflow_provider_finegrained.launchers.select import submit_launcher

    return submit_launcher(settings).ui_links(application_id, driver_ui_url)


class SparkUILink(BaseOperatorLink):
    """The stage's Spark application: its history page once ended (or its cluster manager's page)."""

    name = "Spark UI"

    def get_link(self, operator: Any, *, ti_key: Any) -> str:
        from airflow.sdk.execution_time.xcom import XCom

        targets = SparkUITargets.from_xcom(XCom.get_value(ti_key=ti_key, key=SPARK_UI_KEY))
        return targets.ended_target() if targets is not None else ""


def push_live_link(ti: Any, targets: SparkUITargets) -> None:
    """Store the live target as the link's XCom while the application runs (finalize replaces it)."""
    xcom_writes.push_live_link(ti, targets, SparkUILink().xcom_key)


class LiveLink:
    """Follows spark-submit's output and stores the live Spark UI link as soon as the application is known.

    ``on_line`` for every output line, ``on_application`` for the id; both in the task's own thread.
    ``targets_for`` is the launcher's ``ui_links`` (or, given a connection's settings, its cluster manager's).
    """

    def __init__(self, ti: Any, targets_for: UITargetsFor | ConnectionSettings) -> None:
        self.ti = ti
        if callable(targets_for):
            self.targets_for: UITargetsFor = targets_for
        else:
            settings = targets_for
            self.targets_for = lambda app, ui: spark_ui_targets(settings, app, ui)
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
            push_live_link(self.ti, self.targets_for(self.application_id, self.driver_ui_url))
