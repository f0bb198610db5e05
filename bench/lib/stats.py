"""Statistics over repeated runs: medians that skip what is missing, ratios, spread, and the exact Mann-Whitney
test that decides whether one variant's times are larger than another's beyond chance."""

from __future__ import annotations

import functools
import itertools
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

SIGNIFICANCE = 0.05
"""The p-value below which a benchmark calls one variant slower than another."""


def median(values: Iterable[float | int | None]) -> float | None:
    """The median of the values that are not None; None when there are none."""
    present = [float(v) for v in values if v is not None]
    return statistics.median(present) if present else None


def median_of(records: Iterable[Mapping[str, Any]], key: str, digits: int | None = None) -> float | None:
    """The median of ``key`` over ``records`` (missing or None values skipped), rounded to ``digits`` if given."""
    value = median(r.get(key) for r in records)
    return value if value is None or digits is None else round(value, digits)


def ratio(value: float | None, reference: float | None) -> float | None:
    """``value / reference``; None when either is missing or the reference is zero."""
    if value is None or reference is None or reference == 0:
        return None
    return value / reference


def max_over_median(values: Sequence[float]) -> float:
    """How uneven measured tasks were: the largest over the median; 1.0 for fewer than two, inf when the median
    is zero and the largest is not."""
    if len(values) < 2:
        return 1.0
    middle = statistics.median(values)
    if middle <= 0:
        return math.inf if max(values) > 0 else 1.0
    return max(values) / middle


def slower_p_value(candidate: Sequence[float], best: Sequence[float]) -> float:
    """One-sided exact Mann-Whitney p-value that ``candidate``'s times are larger than ``best``'s.

    The share of all ways of splitting the pooled samples into groups of the two sizes whose U statistic
    (pairs where the first group's time is larger; a tie counts half) is at least the observed one. Without
    ties the null distribution is counted by the usual recurrence; with ties every split is enumerated (a
    few thousand for 7 against 7). No normal approximation, no scipy.
    """
    n, m = len(candidate), len(best)
    if n == 0 or m == 0:
        raise ValueError("both groups need at least one sample")
    observed = _u(candidate, best)
    pooled = [*candidate, *best]
    if len(set(pooled)) == len(pooled):
        counts = _u_counts(n, m)
        return sum(counts[math.ceil(observed - 1e-9) :]) / sum(counts)
    splits = at_least = 0
    for chosen in itertools.combinations(range(len(pooled)), n):
        picked = set(chosen)
        group = [pooled[i] for i in chosen]
        other = [x for i, x in enumerate(pooled) if i not in picked]
        splits += 1
        at_least += _u(group, other) >= observed - 1e-9
    return at_least / splits


def _u(group: Sequence[float], other: Sequence[float]) -> float:
    return sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in group for b in other)


@functools.cache
def _u_counts(n: int, m: int) -> tuple[int, ...]:
    """How many splits of n + m distinct values give U = 0, 1, ..., n * m (the largest value falls in either
    group: in the first it beats all m others, adding m; in the second it adds nothing)."""
    if n == 0 or m == 0:
        return (1,)
    with_first = _u_counts(n - 1, m)
    with_second = _u_counts(n, m - 1)
    return tuple(
        (with_first[u - m] if 0 <= u - m < len(with_first) else 0) + (with_second[u] if u < len(with_second) else 0)
        for u in range(n * m + 1)
    )
