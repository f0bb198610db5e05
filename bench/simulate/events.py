"""A heap-based discrete-event loop: callbacks run in time order, ties in the order scheduled."""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import Any


class EventLoop:
    """Runs scheduled callbacks in order of time; ``now`` is the time of the one running."""

    def __init__(self) -> None:
        self.now = 0.0
        self._heap: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = 0
        self.processed = 0

    def at(self, time: float, callback: Callable[..., None], *args: Any) -> None:
        """Run ``callback(*args)`` at ``time`` (never before now: the past is clamped to now)."""
        self._seq += 1
        heapq.heappush(self._heap, (max(time, self.now), self._seq, callback, args))

    def after(self, delay: float, callback: Callable[..., None], *args: Any) -> None:
        self.at(self.now + delay, callback, *args)

    def run(self, until: float = float("inf")) -> float:
        """Process events until none is left (or the next is after ``until``); returns the last time."""
        heap, pop = self._heap, heapq.heappop
        while heap and heap[0][0] <= until:
            time, _, callback, args = pop(heap)
            self.now = time
            self.processed += 1
            callback(*args)
        return self.now
