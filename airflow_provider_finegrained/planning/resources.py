"""ResourceSpec and FLIP-53's managed-memory fractions within slot sharing groups."""

from __future__ import annotations

import heapq
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_provider_finegrained.planning.units import parse_bytes


@dataclass(frozen=True)
class ResourceSpec:
    """What one parallel instance (task) of a stage needs, as in FLIP-53.

    Memory is in bytes; strings such as ``"2g"`` or ``"512m"`` are parsed. ``cpu_cores`` and
    ``heap_memory`` are required; the other dimensions default to zero.
    """

    cpu_cores: float
    heap_memory: int
    off_heap_memory: int = 0
    managed_memory: int = 0
    gpus: float = 0

    def __post_init__(self) -> None:
        cpu = self.cpu_cores
        if isinstance(cpu, bool) or not isinstance(cpu, int | float) or not math.isfinite(cpu):
            raise ValueError(f"ResourceSpec cpu_cores must be a positive number, got {cpu!r}")
        if cpu <= 0:
            raise ValueError(f"ResourceSpec cpu_cores must be greater than 0, got {cpu!r}")
        for name in ("heap_memory", "off_heap_memory", "managed_memory"):
            parsed = parse_bytes(getattr(self, name), what=f"ResourceSpec {name}")
            object.__setattr__(self, name, parsed)
        gpus = self.gpus
        if isinstance(gpus, bool) or not isinstance(gpus, int | float) or not math.isfinite(gpus) or gpus < 0:
            raise ValueError(f"ResourceSpec gpus must be a number >= 0, got {gpus!r}")

    def __add__(self, other: ResourceSpec) -> ResourceSpec:
        return ResourceSpec(
            cpu_cores=self.cpu_cores + other.cpu_cores,
            heap_memory=self.heap_memory + other.heap_memory,
            off_heap_memory=self.off_heap_memory + other.off_heap_memory,
            managed_memory=self.managed_memory + other.managed_memory,
            gpus=self.gpus + other.gpus,
        )

    @property
    def total_memory(self) -> int:
        return self.heap_memory + self.off_heap_memory + self.managed_memory

    @classmethod
    def from_value(cls, value: ResourceSpec | Mapping[str, object] | None) -> ResourceSpec | None:
        """Accept a spec, a mapping of its fields (as from JSON or an operator argument), or None."""
        if value is None or isinstance(value, ResourceSpec):
            return value
        if isinstance(value, Mapping):
            unknown = set(value) - {"cpu_cores", "heap_memory", "off_heap_memory", "managed_memory", "gpus"}
            if unknown:
                raise ValueError(f"ResourceSpec has no field(s) {sorted(unknown)}")
            if "cpu_cores" not in value or "heap_memory" not in value:
                raise ValueError("ResourceSpec needs cpu_cores and heap_memory")
            return cls(**value)  # type: ignore[arg-type]
        raise ValueError(f"expected a ResourceSpec, a mapping of its fields or None, got {value!r}")


def check_specs_not_mixed(specs: Mapping[str, ResourceSpec | None]) -> None:
    """FLIP-53: all stages declare a ResourceSpec, or none does. Raise naming one of each kind."""
    specified = [s for s, spec in specs.items() if spec is not None]
    if specified and len(specified) < len(specs):
        unknown = [s for s, spec in specs.items() if spec is None]
        raise ValueError(
            f"stage {min(specified)!r} declares a ResourceSpec but stage {min(unknown)!r} does not; "
            "either every stage of a DAG declares resources or none does (FLIP-53)"
        )


def managed_memory_fractions(
    specs: Mapping[str, ResourceSpec | None],
    groups: Mapping[str, str],
    weights: Mapping[str, float] | None = None,
    regions: Mapping[str, str] | None = None,
) -> dict[str, float]:
    """Each stage's share of its slot sharing group's managed (Spark execution) memory.

    Specified stages get ``managed_memory / group sum``; unknown stages get ``weight / sum of
    weights`` (weight 1 by default). A group's fractions never add up to more than 1. With ``regions``
    (each stage's pipelined region) the shares are per region within a group, as FLIP-53 computes them:
    stages of a group's different regions never run at the same time, so they do not share a slot's memory.
    """
    check_specs_not_mixed(specs)
    missing = sorted(set(specs) - set(groups))
    if missing:
        raise ValueError(f"stage {missing[0]!r} has no slot sharing group")
    weights = weights or {}
    for stage, weight in weights.items():
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"stage {stage!r}: managed memory weight must be >= 0, got {weight!r}")

    members: dict[tuple[str, str | None], list[str]] = defaultdict(list)
    for stage in specs:
        members[groups[stage], regions.get(stage) if regions is not None else None].append(stage)

    fractions: dict[str, float] = {}
    for stages in members.values():
        amounts: dict[str, float] = {}
        for stage in stages:
            spec = specs[stage]
            amounts[stage] = float(spec.managed_memory) if spec is not None else float(weights.get(stage, 1.0))
        fractions.update(normalize_shares(amounts))
    return fractions


def normalize_shares(amounts: Mapping[str, float]) -> dict[str, float]:
    """Each stage's share of the amounts' total; the shares never add up to more than 1."""
    return dict(zip(amounts, shares_of(list(amounts.values())), strict=True))


def shares_of(amounts: Sequence[float]) -> list[float]:
    """Each amount's share of their total (all 0 if the total is 0); the shares never add up to more than 1.

    Division rounds to nearest, so n shares of 1/n can sum to 1 + ulp. The largest share (the first
    of equals) is trimmed by one ulp at a time until both the plain and the exact sum are at most 1,
    so stages sharing a slot never oversubscribe it.
    """
    total = math.fsum(amounts)
    if total <= 0:
        return [0.0] * len(amounts)
    shares = [amount / total for amount in amounts]
    if not _over_one(shares):
        return shares
    # One ulp of a share is far below one ulp of the sum, so thousands of trims can be needed and
    # summing after each one is quadratic. A heap yields the same sequence of trims, and since both
    # sums only fall as shares fall, the number of trims can be searched for: try 1, 2, 4, ...
    # trims, then bisect to the first count whose shares sum to at most 1.
    heap = [(-share, i) for i, share in enumerate(shares)]
    heapq.heapify(heap)
    trims: list[tuple[int, float]] = []

    def after(count: int) -> list[float]:
        while len(trims) < count:
            negative, i = heapq.heappop(heap)
            trimmed = math.nextafter(-negative, 0.0)
            trims.append((i, trimmed))
            heapq.heappush(heap, (-trimmed, i))
        trimmed_shares = shares.copy()
        for i, value in trims[:count]:
            trimmed_shares[i] = value
        return trimmed_shares

    over, count = 0, 1  # ``over`` trims are known to leave the sum above 1
    while _over_one(after(count)):
        over, count = count, count * 2
    while count - over > 1:
        middle = (over + count) // 2
        if _over_one(after(middle)):
            over = middle
        else:
            count = middle
    return after(count)


def _over_one(shares: Sequence[float]) -> bool:
    return max(sum(shares), math.fsum(shares)) > 1.0
