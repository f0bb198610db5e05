"""Find and follow the cluster-mode application an earlier try of the region's leader started.

The handle goes to the task state store as soon as the cluster manager has named the application; a retried
leader reattaches to it instead of submitting again (Airflow's resumable-job pattern). A status the manager
cannot tell ("unknown") is asked again for a while, never taken as gone: submitting again could run two
applications of one region side by side. The try that reattached marks the application's region folder, so
the try that submitted it leaves it running when Airflow stops that try later.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from airflow_provider_finegrained.execution.region_context import StateStoreLike
from airflow_provider_finegrained.execution.region_errors import (
    ApplicationStatusUnknown,
    SubmitTimeoutError,
    submit_timeout_message,
)
from airflow_provider_finegrained.execution.region_outcome import Failed
from airflow_provider_finegrained.launchers.base import LaunchHandle, LaunchResult, LaunchStatus, LogLike
from airflow_provider_finegrained.launchers.remote import RemoteApplication
from airflow_provider_finegrained.settings.cluster import ClusterSettings
from airflow_provider_finegrained.storage import filesystem
from airflow_provider_finegrained.storage.locations import join

__all__ = [
    "APPLICATION_KEY",
    "FOLLOWER_FILE",
    "FOLLOW_POLL_S",
    "UNKNOWN_WAIT_S",
    "ApplicationRecord",
    "follower_of",
    "remaining_s",
    "remote_result",
]

APPLICATION_KEY = "finegrained_region_application"
"""Task state store key of the region's cluster-mode application (``LaunchHandle.to_dict``).
Renaming it breaks the reattach of tries already running."""

FOLLOWER_FILE = "_followed_by_try"
"""In a region folder: the later try that reattached to its application (the submitting try must not kill it)."""

FOLLOW_POLL_S = 2.0
"""How often a leader that reattached without deferring asks the cluster manager about the application."""

UNKNOWN_WAIT_S = 120.0
"""How long a leader asks again about a stored application whose status is unknown (an unreachable manager,
a master that forgot its drivers) before it fails: unknown is not gone, and submitting again could run two
applications of the region side by side."""


@dataclass
class ApplicationRecord:
    """The region's application as the task state store keeps it for this try of the leader."""

    settings: ClusterSettings
    store: StateStoreLike | None
    log: LogLike
    region: str
    members: Sequence[str]
    leader: str
    dag_id: str
    run_id: str
    try_number: int
    storage_options: dict[str, Any]
    unknown_wait_s: float = UNKNOWN_WAIT_S
    unknown_poll_s: float = FOLLOW_POLL_S
    stored: bool = False
    """Whether the store holds a handle this run must delete when done."""

    def prior_application(self) -> tuple[LaunchHandle, LaunchStatus] | Failed | None:
        """The cluster-mode application an earlier try left running or finished successfully; None when there
        is none to reattach to (then the region is submitted anew, after the usual reset); Failed when whether
        it runs cannot be told."""
        saved = self.store.get(APPLICATION_KEY) if self.store is not None else None
        if not saved:
            return None
        self.stored = True
        try:
            handle = LaunchHandle.from_dict(saved)
            remote = RemoteApplication(self.settings, handle)
        except ValueError as exc:
            self.log.warning("Region %s: ignoring the stored application (%s); submitting anew", self.region, exc)
            return None
        if handle.master != self.settings.master:
            self.log.warning(
                "Region %s: the stored application %s ran on %s, the connection now names %s; submitting anew",
                self.region,
                handle.remote_id,
                handle.master,
                self.settings.master,
            )
            return None
        status: LaunchStatus | Failed = remote.status()
        if isinstance(status, LaunchStatus) and status.state == "unknown":
            status = self.ask_again(remote, handle, status)
        if isinstance(status, Failed):
            return status
        if status.state in ("pending", "running", "succeeded"):
            return handle, status
        self.log.warning(
            "Region %s: the application %s submitted by try %d ended %s (%s); submitting anew",
            self.region,
            handle.remote_id,
            handle.try_number,
            status.state,
            status.detail,
        )
        return None

    def ask_again(self, remote: RemoteApplication, handle: LaunchHandle, status: LaunchStatus) -> LaunchStatus | Failed:
        """Ask about the application until its status is known, for ``unknown_wait_s`` at most; then fail."""
        deadline = time.monotonic() + self.unknown_wait_s
        while status.state == "unknown" and time.monotonic() < deadline:
            self.log.info(
                "Region %s: the status of %s submitted by try %d is unknown (%s); asking again",
                self.region,
                handle.remote_id,
                handle.try_number,
                status.detail,
            )
            time.sleep(self.unknown_poll_s)
            status = remote.status()
        if status.state != "unknown":
            return status
        stages = ", ".join(self.members)
        unknown = ApplicationStatusUnknown(
            f"region {self.region} (stages {stages}): cannot tell whether application {handle.remote_id}, "
            f"submitted by try {handle.try_number}, still runs on {handle.master}: {status.detail or 'unknown'} "
            f"(asked for {self.unknown_wait_s:g} s); not submitting again, which could run two applications of "
            f"this region side by side. A retry asks again and reattaches if it runs. If it is gone for good "
            f"(stop it on the cluster manager if unsure), delete the task state key {APPLICATION_KEY!r} of task "
            f"{self.leader!r} (DELETE /api/v2/dags/{self.dag_id}/dagRuns/{quote(self.run_id, safe='')}/"
            f"taskInstances/{self.leader}/state-store/{APPLICATION_KEY}) and clear the task"
        )
        return Failed(unknown)

    def remember(self, handle: LaunchHandle) -> None:
        """Persist the application's handle where a retry of this task finds it."""
        if self.store is None:
            self.log.warning(
                "Region %s: no task state store in this Airflow: a retry cannot reattach to %s",
                self.region,
                handle.remote_id,
            )
            return
        self.store.set(APPLICATION_KEY, handle.to_dict())
        self.stored = True
        self.log.info(
            "Region %s: application %s of try %d recorded for reattach",
            self.region,
            handle.remote_id,
            handle.try_number,
        )

    def adopt(self, handle: LaunchHandle) -> None:
        """Mark in the application's region folder that this try follows it: the try that submitted it reads the
        mark when Airflow stops it later, and leaves the application running."""
        mark = join(handle.region_folder, FOLLOWER_FILE)
        filesystem.write_bytes(mark, str(self.try_number).encode(), self.storage_options)

    def follow(self, remote: RemoteApplication, handle: LaunchHandle, timeout_s: float | None) -> LaunchStatus | Failed:
        """Follow an application this process did not start until it ends; stop it past ``submit_timeout``."""
        self.log.info("Region %s: following %s on %s", self.region, handle.remote_id, self.settings.master)
        status = remote.wait(FOLLOW_POLL_S, remaining_s(handle, timeout_s))
        if not status.done:  # submit_timeout passed
            killed = remote.kill()
            self.forget()
            what = f"{handle.remote_id} was still {status.detail or status.state}; {killed}"
            return Failed(
                SubmitTimeoutError(submit_timeout_message(self.leader, self.region, self.members, timeout_s, what))
            )
        return status

    def forget(self) -> None:
        """The application ended and was collected: a later try (or a cleared task) submits its own."""
        if self.stored and self.store is not None:
            self.store.delete(APPLICATION_KEY)
            self.stored = False


def follower_of(handle: LaunchHandle | None, storage_options: dict[str, Any]) -> int | None:
    """A later try that follows the application ``handle`` names (submitted by this try), if one does."""
    if handle is None or not handle.region_folder:
        return None
    try:
        # The storage, not Airflow: a task being stopped may no longer reach its supervisor's API.
        mark = filesystem.read_bytes(join(handle.region_folder, FOLLOWER_FILE), storage_options)
        follower = int(mark)
    except Exception:  # no mark (FileNotFoundError), or unreadable: kill as before
        return None
    return follower if follower > handle.try_number else None


def remaining_s(handle: LaunchHandle, timeout_s: float | None) -> float | None:
    """Seconds left of the leader's ``submit_timeout`` for ``handle``'s application; None without one."""
    if timeout_s is None:
        return None
    return max(0.0, (handle.submitted_at or time.time()) + timeout_s - time.time())


def remote_result(handle: LaunchHandle, status: LaunchStatus) -> LaunchResult:
    """How an application this process did not start ended, as its launch result (for the trace)."""
    return LaunchResult(
        returncode=0 if status.state == "succeeded" else 1,
        application_id=handle.application_id or status.application_id,
        duration_s=time.time() - handle.submitted_at if handle.submitted_at else 0.0,
        tail=(f"{handle.remote_id}: {status.detail or status.state}",),
        driver_id=handle.driver_id,
        killed=status.state == "killed",
    )
