"""Follow and stop an application that a process which may be gone submitted in cluster deploy mode.

A region's application in cluster deploy mode runs on the cluster; the task that submitted it may have
deferred or died. From its :class:`LaunchHandle` (``LaunchHandle.from_dict``) and the connection's
settings, this asks the cluster manager itself, through the manager's own module (:data:`FOLLOWERS`): a
standalone master's ``/json/`` by driver id, YARN's ResourceManager by application id, Kubernetes by
driver pod (``spark-submit --status``). Calls block; triggers run them with ``asyncio.to_thread``. Client
and local mode cannot be followed: the driver was the task's child (``launchers.base.reattach_refusal``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from airflow_provider_finegrained.launchers import kubernetes
from airflow_provider_finegrained.launchers.base import LaunchHandle, LaunchStatus, reattach_refusal
from airflow_provider_finegrained.launchers.standalone import launcher as standalone
from airflow_provider_finegrained.launchers.yarn import launcher as yarn
from airflow_provider_finegrained.settings.cluster import ClusterSettings


@dataclass(frozen=True)
class Follower:
    """How one cluster manager is asked about, and told to stop, an application known only by its handle."""

    status: Callable[[ClusterSettings, LaunchHandle], LaunchStatus]
    kill: Callable[[ClusterSettings, LaunchHandle], str]
    """Stop the application; say what was done."""


FOLLOWERS: Mapping[str, Follower] = {
    "standalone": Follower(standalone.follow_status, standalone.kill_followed),
    "yarn": Follower(yarn.follow_status, yarn.kill_followed),
    "kubernetes": Follower(kubernetes.follow_status, kubernetes.kill_followed),
}
"""Each reattachable launcher's (``launchers.base.REATTACHABLE_LAUNCHERS``) way to follow an application."""


class RemoteApplication:
    """One application on its cluster manager, known by its handle; no process of this task is involved."""

    def __init__(self, settings: ClusterSettings, handle: LaunchHandle) -> None:
        refusal = reattach_refusal(handle.launcher, handle.deploy_mode)
        if refusal is not None:
            raise ValueError(f"application {handle.app_name!r} cannot be followed from another process: {refusal}")
        if not handle.identified():
            raise ValueError(
                f"application {handle.app_name!r}: the {handle.launcher} handle has no id the cluster manager "
                f"knows it by yet ({handle.to_dict()})"
            )
        self.settings = ClusterSettings.of(settings)  # the cluster concern only
        self.handle = handle
        self._follower = FOLLOWERS[handle.launcher]  # reattach_refusal admits only launchers listed there

    def status(self) -> LaunchStatus:
        """The application's state on its cluster manager ("unknown" when it cannot say)."""
        try:
            return self._follower.status(self.settings, self.handle)
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
        return self._follower.kill(self.settings, self.handle)
