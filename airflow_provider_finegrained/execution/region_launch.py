"""Submit a region's application and follow it until it ends, this try's own submission.

The handle grows as the cluster manager names the application (a driver id in spark-submit's output, an
application id); once named, it is recorded for a retry to reattach to. A deferrable leader stops following
there (``RegionDeferral``) and leaves the application to the triggerer. An application that outlives
``submit_timeout`` is stopped where it runs.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace

from airflow_provider_finegrained.execution.reattach import ApplicationRecord
from airflow_provider_finegrained.execution.region_context import LiveLinkLike, RegionDeferral, RunFacts
from airflow_provider_finegrained.execution.region_errors import SubmitTimeoutError, submit_timeout_message
from airflow_provider_finegrained.launchers.base import (
    Launcher,
    LaunchEvents,
    LaunchHandle,
    LaunchResult,
    LaunchSpec,
    LogLike,
    reattach_refusal,
)
from airflow_provider_finegrained.launchers.remote import RemoteApplication
from airflow_provider_finegrained.settings.cluster import ClusterSettings
from airflow_provider_finegrained.spark.log_ids import find_driver_id
from airflow_provider_finegrained.spark.process import SparkSubmitTimeout

__all__ = ["Submission"]


class _Detach(Exception):
    """Raised from the output callback to stop following spark-submit once the application is named."""


@dataclass
class Submission:
    """This try's submission of the region's application: ``handle`` once submitted."""

    settings: ClusterSettings
    record: ApplicationRecord
    log: LogLike
    region: str
    members: Sequence[str]
    leader: str
    submit_timeout: float | None
    deferrable: bool
    handle: LaunchHandle | None = None

    def timeout_message(self, what: str) -> str:
        return submit_timeout_message(self.leader, self.region, self.members, self.submit_timeout, what)

    def launch(
        self, launcher: Launcher, spec: LaunchSpec, facts: RunFacts, live: LiveLinkLike, folder: str, try_number: int
    ) -> LaunchResult:
        """Submit and wait; raise RegionDeferral once a deferrable leader's application is named."""
        refusal = reattach_refusal(launcher.name, self.settings.deploy_mode)
        if refusal is not None and self.deferrable:
            self.log.info(
                "Region %s: deferrable=True has no effect here (%s); the task follows it", self.region, refusal
            )
        remembered = False

        def identify(driver_id: str | None = None, application_id: str | None = None) -> None:
            # Runs in this (the task's) thread: the state store may be written from here.
            nonlocal remembered
            handle = self.handle
            if refusal is not None or handle is None:
                return
            self.handle = handle = replace(
                handle,
                driver_id=handle.driver_id or driver_id,
                application_id=handle.application_id or application_id,
            )
            if not handle.identified():
                return
            if not remembered:
                self.record.remember(handle)
                remembered = True
            # A Kubernetes pod is named before it exists: stop following once Spark reported the application.
            if self.deferrable and (handle.launcher != "kubernetes" or handle.application_id):
                raise _Detach

        def on_line(line: str) -> None:
            self.log.info("%s", line)
            live.on_line(line)
            if (driver_id := find_driver_id(line)) is not None:
                identify(driver_id=driver_id)

        def on_application(app_id: str) -> None:
            live.on_application(app_id)
            identify(application_id=app_id)

        handle = launcher.submit(spec, LaunchEvents(on_line=on_line, on_application=on_application))
        self.handle = submitted = replace(
            handle,
            master=self.settings.master,
            deploy_mode=self.settings.deploy_mode,
            region_folder=folder,
            try_number=try_number,
            submitted_at=time.time(),
        )
        try:
            identify()  # a Kubernetes driver pod is named up front
            return launcher.wait(self.handle)
        except SparkSubmitTimeout as exc:
            raise self.stop_timed_out(launcher, exc) from None
        except _Detach:
            # spark-submit (only following the driver, which runs on the cluster) was stopped by the raise;
            # the application runs on. The triggerer follows it from here.
            handle = self.handle or submitted
            self.log.info(
                "Region %s: %s runs on %s; the task defers while it runs",
                self.region,
                handle.remote_id,
                self.settings.master,
            )
            raise RegionDeferral(handle, facts) from None

    def stop_timed_out(self, launcher: Launcher, exc: SparkSubmitTimeout) -> SubmitTimeoutError:
        """spark-submit outlived ``submit_timeout`` (and was stopped): stop the application where it runs, since
        in cluster mode it runs on without spark-submit, or is still waiting to be accepted."""
        handle = self.handle
        followable = handle is not None and handle.identified()
        if followable and handle is not None and reattach_refusal(handle.launcher, handle.deploy_mode) is None:
            status = RemoteApplication(self.settings, handle).status()  # "unknown" when the manager cannot say
            what = f"application {handle.remote_id} was still {status.detail or status.state}"
        elif self.settings.deploy_mode == "cluster":
            what = f"{self.settings.master} had not accepted the application yet"
        else:
            what = "the application had not ended"
        killed = launcher.kill(handle)
        self.record.forget()
        return SubmitTimeoutError(self.timeout_message(f"{what}; {exc}; {killed}"))
