"""Consumed partition ranges balanced by bytes (FLIP-187's follow-up on skew).

Each consumer task reads a contiguous, inclusive range of upstream partitions: small partitions
are coalesced, and a partition above the target is read alone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from airflow_provider_finegrained.planning.parallelism import (
    ConsumedResult,
    ParallelismConfig,
    decide_parallelism,
)

Range = tuple[int, int]


def balanced_ranges(subpartition_bytes: Sequence[int], config: ParallelismConfig) -> list[Range]:
    """Split partitions into byte-balanced ranges whose count respects the config's bounds.

    Greedy ranges up to ``avg_bytes_per_task``; with too few, the largest limit below it that
    reaches the minimum (then the smallest limit giving that same count, for the most even
    spread); with too many, the smallest limit above it that stays within the maximum; and when no
    limit gives a count inside the bounds, equal partition counts for ``decide_parallelism`` tasks.
    """
    sizes = ConsumedResult(subpartition_bytes).partition_bytes  # validates the sizes
    if not sizes:
        return []
    low, high = config.min_parallelism, config.max_parallelism
    target = config.avg_bytes_per_task

    def count(limit: int) -> int:
        return _greedy_count(sizes, limit)

    n = count(target)
    if n < low:
        # count() never grows with the limit, so these searches are binary searches.
        best = _last_true(0, target, lambda limit: count(limit) >= low)
        if best is not None:
            n = count(best)
            target = _first_true(0, best, lambda limit: count(limit) <= n) or 0
    elif n > high:
        target = _first_true(target, max(target, sum(sizes)), lambda limit: count(limit) <= high) or target
        n = count(target)
    if low <= n <= high:
        return _greedy_ranges(sizes, target)

    tasks = decide_parallelism([ConsumedResult(sizes)], config)
    total = len(sizes)
    return [(i * total // tasks, (i + 1) * total // tasks - 1) for i in range(tasks)]


def _greedy_ranges(sizes: Sequence[int], limit: int) -> list[Range]:
    ranges: list[Range] = []
    start, acc = 0, 0
    for i, size in enumerate(sizes):
        if i > start and acc + size > limit:
            ranges.append((start, i - 1))
            start, acc = i, 0
        acc += size
    ranges.append((start, len(sizes) - 1))
    return ranges


def _greedy_count(sizes: Sequence[int], limit: int) -> int:
    count, acc, empty = 1, 0, True
    for size in sizes:
        if not empty and acc + size > limit:
            count, acc = count + 1, 0
        acc += size
        empty = False
    return count


def _last_true(lo: int, hi: int, pred: Callable[[int], bool]) -> int | None:
    """Largest x in [lo, hi] with pred(x), for pred true then false as x grows."""
    if not pred(lo):
        return None
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if pred(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo


def _first_true(lo: int, hi: int, pred: Callable[[int], bool]) -> int | None:
    """Smallest x in [lo, hi] with pred(x), for pred false then true as x grows."""
    if not pred(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if pred(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo
