"""A region's cluster-mode application followed from the triggerer, while its leader task holds no worker slot.

The leader submits, records the application's handle in the task state store and defers here; this
trigger asks the cluster manager (``launchers.remote``) until the application has ended and hands the
task back the final state. A user's kill (mark failed/success, clear) stops the application (``on_kill``),
and so does the leader's ``submit_timeout`` passing; a triggerer restart or move leaves it running and
the trigger is started again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_finegrained.launchers.base import LaunchHandle
from airflow_provider_finegrained.launchers.remote import RemoteApplication
from airflow_provider_finegrained.triggers.settle import wait_until


def _application(conn_id: str, handle: dict[str, Any]) -> RemoteApplication:
    """The application, with the connection's settings read where the trigger runs (never carried in kwargs)."""
    from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook

    return RemoteApplication(FineGrainedSparkHook(conn_id).get_settings(), LaunchHandle.from_dict(handle))


def _kill(app: RemoteApplication) -> str:
    """Stop the application; what was done, or why it could not be (the event says so either way)."""
    try:
        return app.kill()
    except Exception as exc:
        return f"could not kill it: {type(exc).__name__}: {exc}"


class RegionApplicationTrigger(BaseTrigger):
    """Fires once the region's application has ended, or once its cluster manager could not say for too long.

    The event's ``status`` is the launch state (``succeeded``, ``failed``, ``killed``, or ``unknown``), or
    ``timeout`` when ``submit_timeout`` passed first (the application was killed);
    ``detail`` says what the cluster manager answered; ``handle`` and ``facts`` come back unchanged, since
    ``dag.test`` resumes the task with the event alone.

    :param conn_id: the ``finegrained_spark`` connection (its settings are read in the triggerer).
    :param handle: ``LaunchHandle.to_dict()`` of the submitted application.
    :param facts: what the leader's trace needs from before the deferral (``RunFacts.to_dict()``).
    :param poll_interval: seconds between two questions to the cluster manager.
    :param unknown_timeout: seconds of "unknown" answers in a row (manager unreachable, application
        forgotten) before giving up with an ``unknown`` event.
    :param not_before: no event before this time (``triggers.settle``), however soon the application ends.
    :param submit_timeout: the leader's ``submit_timeout``: seconds from the submission (the handle's
        ``submitted_at``) after which the application is killed and a ``timeout`` event fires; None: none.
    """

    def __init__(
        self,
        conn_id: str,
        handle: dict[str, Any],
        facts: dict[str, Any] | None = None,
        poll_interval: float = 5.0,
        unknown_timeout: float = 300.0,
        not_before: float | None = None,
        submit_timeout: float | None = None,
    ) -> None:
        super().__init__()
        self.conn_id = conn_id
        self.handle = handle
        self.facts = facts or {}
        self.poll_interval = poll_interval
        self.unknown_timeout = unknown_timeout
        self.not_before = not_before
        self.submit_timeout = submit_timeout

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "conn_id": self.conn_id,
                "handle": self.handle,
                "facts": self.facts,
                "poll_interval": self.poll_interval,
                "unknown_timeout": self.unknown_timeout,
                "not_before": self.not_before,
                "submit_timeout": self.submit_timeout,
            },
        )

    def _event(self, status: str, detail: str) -> TriggerEvent:
        return TriggerEvent({"status": status, "detail": detail, "handle": self.handle, "facts": self.facts})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        async for event in self._follow():
            await wait_until(self.not_before)
            yield event
            return

    async def _follow(self) -> AsyncIterator[TriggerEvent]:
        try:
            app = await asyncio.to_thread(_application, self.conn_id, self.handle)
        except Exception as exc:  # a bad connection or handle: the task fails with the reason
            yield self._event("unknown", f"cannot follow the application: {exc}")
            return
        timeout = self.submit_timeout
        deadline = None if timeout is None else (app.handle.submitted_at or time.time()) + timeout
        unknown_since: float | None = None
        while True:
            status = await asyncio.to_thread(app.status)
            if status.done:
                yield self._event(status.state, status.detail)
                return
            if deadline is not None and time.time() >= deadline:
                killed = await asyncio.to_thread(_kill, app)
                still = status.detail or status.state
                yield self._event("timeout", f"application {app.handle.remote_id} was still {still}; {killed}")
                return
            if status.state == "unknown":
                unknown_since = unknown_since or time.monotonic()
                if time.monotonic() - unknown_since >= self.unknown_timeout:
                    yield self._event("unknown", f"{status.detail} (for {self.unknown_timeout:g} s)")
                    return
            else:
                unknown_since = None
            self.log.info("Region application %s: %s", app.handle.remote_id, status.detail or status.state)
            pause = self.poll_interval if deadline is None else min(self.poll_interval, deadline - time.time())
            await asyncio.sleep(max(0.0, pause))

    async def on_kill(self) -> None:
        """The user killed the deferred task: stop the application on its cluster."""
        app = await asyncio.to_thread(_application, self.conn_id, self.handle)
        self.log.info("Task killed: %s", await asyncio.to_thread(app.kill))
