"""Follow and stop an application that a process which may be gone submitted in cluster deploy mode.

A region's application in cluster deploy mode runs on the cluster; the task that submitted it may have
deferred or died. From its :class:`LaunchHandle` (``LaunchHandle.from_dict``) and the connection's
settings, this asks the cluster manager itself: a standalone master's ``/json/`` by driver id, YARN's
ResourceManager by application id, Kubernetes by driver pod (``spark-submit --status``). Calls block;
triggers run them with ``asyncio.to_thread``. Client and local mode cannot be followed: the driver was
the task's child (``launchers.base.reattach_refusal``).
"""

from __future__ import annotations

import subprocess
import time
from typing import TYPE_CHECKING

from airflow_provider_finegrained.launchers.base import LaunchHandle, LaunchState, LaunchStatus, reattach_refusal

if TYPE_CHECKING:
    from airflow_provider_finegrained.hooks.settings import ConnectionSettings

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


class RemoteApplication:
    """One application on its cluster manager, known by its handle; no process of this task is involved."""

    def __init__(self, settings: ConnectionSettings, handle: LaunchHandle) -> None:
        refusal = reattach_refusal(handle.launcher, handle.deploy_mode)
        if refusal is not None:
            raise ValueError(f"application {handle.app_name!r} cannot be followed from another process: {refusal}")
        if not handle.identified():
            raise ValueError(
                f"application {handle.app_name!r}: the {handle.launcher} handle has no id the cluster manager "
                f"knows it by yet ({handle.to_dict()})"
            )
        self.settings = settings
        self.handle = handle

    def status(self) -> LaunchStatus:
        """The application's state on its cluster manager ("unknown" when it cannot say)."""
        try:
            if self.handle.launcher == "standalone":
                return self._standalone_status()
            if self.handle.launcher == "yarn":
                return self._yarn_status()
            return self._kubernetes_status()
        except Exception as exc:  # an unreachable manager is not a verdict on the application
            return LaunchStatus("unknown", self.handle.application_id, self.handle.driver_id, f"could not ask: {exc}")

    def wait(self, poll_s: float = 2.0, timeout_s: float | None = None) -> LaunchStatus:
        """Poll until the application has ended (or ``timeout_s`` passed: the last status is returned)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            status = self.status()
            if status.done or (deadline is not None and time.monotonic() >= deadline):
                return status
            time.sleep(poll_s)

    def kill(self) -> str:
        """Stop the application on its cluster manager; say what was done."""
        handle, settings = self.handle, self.settings
        if handle.launcher == "standalone":
            from airflow_provider_finegrained.launchers.standalone import client

            assert handle.driver_id is not None  # identified() checked it
            urls = settings.webui_json_urls()
            state = client.kill_driver(
                settings.master.split(",")[0],
                handle.driver_id,
                spark_home=settings.spark_home,
                webui_json_url=urls[0] if urls else None,
            )
            return f"Driver {handle.driver_id} on {settings.master} ended: {state}"
        if handle.launcher == "yarn":
            from airflow_provider_finegrained.launchers.yarn.applications import kill_yarn_app

            rm_url = settings.yarn_resourcemanager_url
            if not rm_url:
                return (
                    f"YARN application {handle.application_id} may still run: set yarn_resourcemanager_url so it "
                    f"can be killed from here, or run `yarn application -kill {handle.application_id}`"
                )
            assert handle.application_id is not None
            return f"YARN application {handle.application_id}: {kill_yarn_app(rm_url, handle.application_id)}"
        from airflow_provider_finegrained.launchers.kubernetes import COMMAND_TIMEOUT_S, KubernetesLauncher

        command = KubernetesLauncher(settings).kill_command(handle)
        subprocess.run(command, check=False, timeout=COMMAND_TIMEOUT_S, capture_output=True)
        return f"asked Kubernetes to delete driver pod {handle.submission_id}"

    # -- each cluster manager ------------------------------------------------------------------------

    def _standalone_status(self) -> LaunchStatus:
        from airflow_provider_finegrained.launchers.standalone.client import driver_state

        driver_id = self.handle.driver_id
        assert driver_id is not None
        urls = self.settings.webui_json_urls()
        if not urls:
            return LaunchStatus("unknown", None, driver_id, "no master web UI to ask (set master_webui_url)")
        found = driver_state(urls[0], driver_id)
        if found is None:
            return LaunchStatus("unknown", None, driver_id, f"the master at {urls[0]} does not know {driver_id}")
        state = STANDALONE_DRIVER_STATES.get(found, "unknown")
        return LaunchStatus(state, self.handle.application_id, driver_id, f"driver {driver_id} is {found}")

    def _yarn_status(self) -> LaunchStatus:
        from airflow_provider_finegrained.launchers.yarn.applications import yarn_app_status, yarn_launch_status

        app_id, rm_url = self.handle.application_id, self.settings.yarn_resourcemanager_url
        assert app_id is not None
        if not rm_url:
            return LaunchStatus("unknown", app_id, None, "no ResourceManager to ask (set yarn_resourcemanager_url)")
        return yarn_launch_status(yarn_app_status(rm_url, app_id), app_id)

    def _kubernetes_status(self) -> LaunchStatus:
        from airflow_provider_finegrained.launchers.kubernetes import KubernetesLauncher

        return KubernetesLauncher(self.settings).status(self.handle)
