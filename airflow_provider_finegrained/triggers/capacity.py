"""A region that does not fit the cluster's free capacity waits here, in the triggerer, not in a worker slot."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import asdict
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_provider_finegrained.execution.capacity_gate import CapacitySource
from airflow_provider_finegrained.planning.capacity import CapacityOutcome, ExecutorRequest, decide_capacity
from airflow_provider_finegrained.triggers.settle import wait_until


class CapacityTrigger(BaseTrigger):
    """Fires when the region's request (at least its minimum) fits the free capacity, or at the deadline.

    The event's ``status`` is ``available``, ``impossible`` or ``timeout``; ``message`` says what was
    asked and what was free at the last look. Capacity is only looked at here: the task reserves it
    when it resumes, and waits again if another region took it first.

    ``not_before``: no look (and no event) before this time (``triggers.settle``); the task looked at the
    capacity just before it deferred.

    ``source`` is ``CapacitySource.to_dict()``: a ledger on shared storage travels as its location and the
    connection id; its storage options (secrets) are resolved here, in the triggerer, from that connection.
    """

    def __init__(
        self,
        source: dict[str, Any],
        request: dict[str, Any],
        deadline: float,
        poll_interval: float,
        since: float | None = None,
        not_before: float | None = None,
    ) -> None:
        super().__init__()
        self.source = source
        self.request = request
        self.deadline = deadline
        self.poll_interval = poll_interval
        self.since = time.time() if since is None else since
        self.not_before = not_before

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            f"{type(self).__module__}.{type(self).__qualname__}",
            {
                "source": self.source,
                "request": self.request,
                "deadline": self.deadline,
                "poll_interval": self.poll_interval,
                "since": self.since,
                "not_before": self.not_before,
            },
        )

    async def run(self) -> AsyncIterator[TriggerEvent]:
        source = CapacitySource.from_dict(self.source)
        request = ExecutorRequest(**self.request)
        message = "capacity was not checked"
        # The wait's start and deadline travel in every event: `dag.test` replaces the resume kwargs by the event.
        waited = {"since": self.since, "deadline": self.deadline}
        await wait_until(self.not_before)
        while True:
            try:
                if source.needs_storage_options:
                    source = await asyncio.to_thread(_with_storage_options, source)
                capacity = await asyncio.to_thread(source.read)
            except Exception as exc:  # the master may be restarting: keep asking until the deadline
                message = f"could not read the free capacity: {exc}"
            else:
                decision = decide_capacity(
                    request.in_containers_of(capacity.memory_step), capacity.workers, capacity.master_limit
                )
                message = f"{decision.message} ({capacity.source})"
                if decision.can_run:
                    yield TriggerEvent({"status": "available", "message": message, "waited": waited})
                    return
                if decision.outcome is CapacityOutcome.IMPOSSIBLE:
                    yield TriggerEvent({"status": "impossible", "message": message, "waited": waited})
                    return
            remaining = self.deadline - time.time()
            if remaining <= 0:
                yield TriggerEvent({"status": "timeout", "message": message, "waited": waited})
                return
            self.log.info("Waiting for capacity: %s", message)
            await asyncio.sleep(min(self.poll_interval, remaining))


def request_to_dict(request: ExecutorRequest) -> dict[str, Any]:
    return asdict(request)


def _with_storage_options(source: CapacitySource) -> CapacitySource:
    """The source with its ledger's storage options, from the connection it names (none named: fsspec's defaults)."""
    if source.conn_id is None:
        return source.with_storage_options({})
    from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook

    return source.with_storage_options(FineGrainedSparkHook(source.conn_id).storage_options())
