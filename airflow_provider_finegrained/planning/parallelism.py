"""FLIP-187's vertex parallelism decider: a stage's parallelism from the bytes it consumes."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Literal

from airflow_provider_finegrained.planning.units import parse_bytes

DEFAULT_AVG_BYTES_PER_TASK = 64 * 2**20
"""Default bytes of upstream output per task; docs/benchmarks/bytes-per-task.md has the measurement behind it."""

NORMALIZE_MODES = ("none", "power_of_two")


_PLAIN_INT = frozenset({int})


@dataclass(frozen=True)
class ConsumedResult:
    """One upstream output a stage reads: the bytes of each of its partitions."""

    partition_bytes: Sequence[int]
    broadcast: bool = False

    def __post_init__(self) -> None:
        sizes = tuple(self.partition_bytes)
        # Plain ints >= 0 pass at C speed (a stage reads thousands of partitions); anything else
        # is checked one by one, so the first bad size is the one named.
        if not _PLAIN_INT.issuperset(map(type, sizes)) or min(sizes, default=0) < 0:
            for size in sizes:
                if isinstance(size, bool) or not isinstance(size, int) or size < 0:
                    raise ValueError(f"partition sizes must be byte counts >= 0, got {size!r}")
        object.__setattr__(self, "partition_bytes", sizes)

    @property
    def total_bytes(self) -> int:
        return sum(self.partition_bytes)


@dataclass(frozen=True)
class ParallelismConfig:
    """Bounds and targets of the adaptive parallelism decision (FLIP-187's options)."""

    min_parallelism: int = 1
    max_parallelism: int = 128
    avg_bytes_per_task: int = DEFAULT_AVG_BYTES_PER_TASK
    default_source_parallelism: int | None = None
    max_broadcast_ratio: float = 0.5
    normalize: Literal["none", "power_of_two"] = "none"

    def __post_init__(self) -> None:
        object.__setattr__(self, "avg_bytes_per_task", parse_bytes(self.avg_bytes_per_task, what="avg_bytes_per_task"))
        _require_int("min_parallelism", self.min_parallelism, minimum=1)
        _require_int("max_parallelism", self.max_parallelism, minimum=1)
        if self.min_parallelism > self.max_parallelism:
            raise ValueError(
                f"min_parallelism ({self.min_parallelism}) is above max_parallelism "
                f"({self.max_parallelism}); min_parallelism must be <= max_parallelism"
            )
        if self.avg_bytes_per_task <= 0:
            raise ValueError(f"avg_bytes_per_task must be > 0, got {self.avg_bytes_per_task}")
        if self.default_source_parallelism is not None:
            _require_int("default_source_parallelism", self.default_source_parallelism, minimum=1)
        ratio = self.max_broadcast_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio < 1:
            raise ValueError(f"max_broadcast_ratio must be in [0, 1), got {ratio!r}")
        if self.normalize not in NORMALIZE_MODES:
            raise ValueError(f"normalize must be one of {NORMALIZE_MODES}, got {self.normalize!r}")
        if self.normalize == "power_of_two" and _pow2_ceil(self.min_parallelism) > self.max_parallelism:
            raise ValueError(
                f"normalize='power_of_two' needs a power of two between min_parallelism "
                f"({self.min_parallelism}) and max_parallelism ({self.max_parallelism}); there is none"
            )

    @property
    def bounds(self) -> tuple[int, int]:
        """The effective ``(min, max)``: rounded inward to powers of two when normalizing."""
        if self.normalize == "power_of_two":
            return _pow2_ceil(self.min_parallelism), _pow2_floor(self.max_parallelism)
        return self.min_parallelism, self.max_parallelism


@dataclass(frozen=True)
class ParallelismDecision:
    """A decided parallelism and why: the numbers behind it and the rule or bound that set it."""

    parallelism: int
    rule: str
    computed: int | None = None
    non_broadcast_bytes: int = 0
    broadcast_bytes: int = 0
    counted_broadcast_bytes: int = 0
    notes: tuple[str, ...] = field(default=())


def decide_parallelism(consumed: Sequence[ConsumedResult], config: ParallelismConfig) -> int:
    """Parallelism of a stage that reads ``consumed`` (FLIP-187); see :func:`explain_parallelism`."""
    return _decide(consumed, config)[0]


def explain_parallelism(consumed: Sequence[ConsumedResult], config: ParallelismConfig) -> ParallelismDecision:
    """Decide a stage's parallelism and say which rule or bound decided it.

    A source (nothing consumed) gets ``default_source_parallelism``, else ``max_parallelism``, as
    given. Otherwise broadcast bytes count against each task's volume, capped at
    ``max_broadcast_ratio`` of it: ``p = ceil(non_broadcast / (avg_bytes_per_task - capped))``,
    then normalized (optionally) and clamped to the bounds.
    """
    return ParallelismDecision(*_decide(consumed, config))


_Decision = tuple[int, str, int | None, int, int, int, tuple[str, ...]]
"""A ParallelismDecision's fields; decide_parallelism needs only the first, so builds no object."""


def _decide(consumed: Sequence[ConsumedResult], config: ParallelismConfig) -> _Decision:
    if not consumed:
        if config.default_source_parallelism is not None:
            return config.default_source_parallelism, "source: default_source_parallelism", None, 0, 0, 0, ()
        return config.max_parallelism, "source: max_parallelism (no default set)", None, 0, 0, 0, ()

    non_broadcast = broadcast = 0
    for result in consumed:
        if result.broadcast:
            broadcast += sum(result.partition_bytes)
        else:
            non_broadcast += sum(result.partition_bytes)
    per_task = config.avg_bytes_per_task
    # Exact integer arithmetic: a float quotient such as 4.000000001 would wrongly round up to 5.
    # With the ratio as num/den, broadcast bytes count up to num/den * per_task of each task.
    num, den = _ratio(config.max_broadcast_ratio)
    if broadcast * den <= num * per_task:
        counted = broadcast
        computed = -(-non_broadcast // (per_task - broadcast))
    else:  # capped: per task, per_task * (den - num) / den bytes remain for non-broadcast input
        counted = num * per_task // den
        computed = -(-non_broadcast * den // (per_task * (den - num)))
    low, high = config.bounds

    if non_broadcast == 0:
        return low, "zero bytes: min_parallelism", computed, non_broadcast, broadcast, counted, ()

    notes: tuple[str, ...] = ()
    candidate = computed
    if config.normalize == "power_of_two":
        candidate = _nearest_pow2(computed)
        if candidate != computed:
            notes = (f"normalized {computed} to power of two {candidate}",)
    if candidate < low:
        return low, "clamped to min_parallelism", computed, non_broadcast, broadcast, counted, notes
    if candidate > high:
        return high, "clamped to max_parallelism", computed, non_broadcast, broadcast, counted, notes
    return candidate, "bytes / avg_bytes_per_task", computed, non_broadcast, broadcast, counted, notes


@functools.lru_cache(maxsize=64)
def _ratio(max_broadcast_ratio: float) -> tuple[int, int]:
    """``max_broadcast_ratio`` as a fraction (numerator, denominator), as Fraction.limit_denominator(10**9) gives it."""
    ratio = Fraction(max_broadcast_ratio).limit_denominator(10**9)
    return ratio.numerator, ratio.denominator


def _require_int(name: str, value: object, *, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


def _pow2_floor(n: int) -> int:
    return 1 << (n.bit_length() - 1) if n >= 1 else 1


def _pow2_ceil(n: int) -> int:
    return 1 << (n - 1).bit_length() if n > 1 else 1


def _nearest_pow2(n: int) -> int:
    """The nearer power of two; a tie (3 between 2 and 4) goes up."""
    low, high = _pow2_floor(n), _pow2_ceil(n)
    return low if n - low < high - n else high
