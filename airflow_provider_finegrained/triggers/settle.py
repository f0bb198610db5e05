"""A deferred task's trigger does not fire within seconds of the deferral.

When a trigger fires within a few seconds of the deferral and the scheduler is busy, Airflow 3.3 can drain
the worker's stale "success" event of the deferring try after the trigger has already re-queued or resumed
the task, and fails it as "state changed externally" (apache/airflow#72716, #71580, #66374; fixes proposed
upstream in #72767 and #71579). A floor on when the first event is yielded gives the scheduler that time;
it is a mitigation for this race only (seen after 3 to 27 s in those reports), not a cure.
"""

from __future__ import annotations

import asyncio
import time


def not_before(min_wait: float) -> float | None:
    """The earliest time (epoch seconds) a trigger deferred now may fire; None when there is no floor."""
    return time.time() + min_wait if min_wait > 0 else None


async def wait_until(when: float | None) -> None:
    """Sleep until ``when`` (epoch seconds); at once when it is None or past (a restarted triggerer)."""
    if when is not None:
        await asyncio.sleep(max(0.0, when - time.time()))
