"""Submit a region's application and follow it until it ends, this try's own submission.

A straight sequence: submit; where the application can outlive the task (cluster deploy mode), follow it until
the cluster manager has named it and record it for a retry to reattach to; a deferrable leader stops following
there (``AwaitApplication``) and leaves the application to the triggerer; else follow it to its end. An
application that outlives ``submit_timeout`` is stopped where it runs (``Failed``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial

from airflow_provider_finegrained.execution.reattach import ApplicationRecord
from airflow_provider_finegrained.execution.region_context import LiveLinkLike, RunFacts
from airflow_provider_finegrained.execution.region_errors import (
    SubmitTimeoutError,
    not_started,
    start_failure,
    submit_timeout_message,
)
from airflow_provider_finegrained.execution.region_outcome import AwaitApplication, Failed
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
from airflow_provider_finegrained.spark.process import SparkSubmitTimeout

__all__ = ["Submission"]


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
    remembered: bool = False
    killed: bool = False
    restarted: str | None = None
    """Why the application was submitted again: its first SparkContext did not start (at most once)."""

    def timeout_message(self, what: str) -> str:
        return submit_timeout_message(self.leader, self.region, self.members, self.submit_timeout, what)

    def launch(
        self, launcher: Launcher, spec: LaunchSpec, facts: RunFacts, live: LiveLinkLike, folder: str, try_number: int
    ) -> LaunchResult | AwaitApplication | Failed:
        """Submit and follow to the end; or, for a deferrable leader, until the application is named."""
        refusal = reattach_refusal(launcher.name, self.settings.deploy_mode)
        if refusal is not None and self.deferrable:
            self.log.info(
                "Region %s: deferrable=True has no effect here (%s); the task follows it", self.region, refusal
            )
        attempt = partial(self.submit_and_follow, launcher, spec, facts, live, folder, try_number, refusal)
        result = attempt()
        if isinstance(result, LaunchResult) and not_started(result) and not self.killed:
            # Nothing ran and nothing was written: a start that lost a race (seen on YARN: SparkUI's handlers
            # changed while it attached them) is not worth a failed task. Once only: a start that fails for a
            # reason of its own (a setting the cluster refuses) fails again the same way.
            self.restarted = f"its first SparkContext did not start ({start_failure(result)})"
            self.log.warning("Region %s: %s; submitting it once more", self.region, self.restarted)
            self.record.forget()
            self.remembered = False
            result = attempt()
        return result

    def submit_and_follow(
        self,
        launcher: Launcher,
        spec: LaunchSpec,
        facts: RunFacts,
        live: LiveLinkLike,
        folder: str,
        try_number: int,
        refusal: str | None,
    ) -> LaunchResult | AwaitApplication | Failed:
        submitted = launcher.submit(spec, LaunchEvents(on_line=self.echo(live), on_application=live.on_application))
        self.handle = handle = replace(
            submitted,
            master=self.settings.master,
            deploy_mode=self.settings.deploy_mode,
            region_folder=folder,
            try_number=try_number,
            submitted_at=time.time(),
        )
        try:
            if refusal is None:
                handle = self.follow_until_named(launcher, handle)
                if self.deferrable and self.named_for_the_triggerer(handle):
                    return self.detach(launcher, handle, facts)
            return launcher.wait(handle)
        except SparkSubmitTimeout as exc:
            return Failed(self.stop_timed_out(launcher, exc))

    def echo(self, live: LiveLinkLike) -> Callable[[str], None]:
        def on_line(line: str) -> None:
            self.log.info("%s", line)
            live.on_line(line)

        return on_line

    def follow_until_named(self, launcher: Launcher, handle: LaunchHandle) -> LaunchHandle:
        """Record the application as soon as the cluster manager has named it, for a retry to reattach to."""
        self.remember(handle)  # a Kubernetes driver pod is named up front
        self.handle = handle = launcher.wait_named(handle)
        self.remember(handle)
        return handle

    def remember(self, handle: LaunchHandle) -> None:
        if handle.identified() and not self.remembered:
            self.record.remember(handle)
            self.remembered = True

    @staticmethod
    def named_for_the_triggerer(handle: LaunchHandle) -> bool:
        # A Kubernetes pod is named before it exists: the triggerer takes over once Spark reported the application.
        return handle.identified() and (handle.launcher != "kubernetes" or handle.application_id is not None)

    def detach(self, launcher: Launcher, handle: LaunchHandle, facts: RunFacts) -> AwaitApplication:
        """Stop following here (spark-submit only follows the driver, which runs on the cluster): the
        application runs on, and the triggerer follows it from here."""
        launcher.detach(handle)
        self.log.info(
            "Region %s: %s runs on %s; the task defers while it runs",
            self.region,
            handle.remote_id,
            self.settings.master,
        )
        return AwaitApplication(handle, facts)

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
