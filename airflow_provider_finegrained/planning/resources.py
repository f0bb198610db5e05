"""ResourceSpec and FLIP-53's managed-memory fractions within slot sharing groups."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
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
    specified = sorted(s for s, spec in specs.items() if spec is not None)
    unknown = sorted(s for s, spec in specs.items() if spec is None)
    if specified and unknown:
        raise ValueError(
            f"stage {specified[0]!r} declares a ResourceSpec but stage {unknown[0]!r} does not; "
            "either every stage of a DAG declares resources or none does (FLIP-53)"
        )


def managed_memory_fractions(
    specs: Mapping[str, ResourceSpec | None],
    groups: Mapping[str, str],
    weights: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Each stage's share of its slot sharing group's managed (Spark execution) memory.

    Specified stages get ``managed_memory / group sum``; unknown stages get ``weight / sum of
    weights`` (weight 1 by default). A group's fractions never add up to more than 1.
    """
    check_specs_not_mixed(specs)
    missing = sorted(set(specs) - set(groups))
    if missing:
        raise ValueError(f"stage {missing[0]!r} has no slot sharing group")
    weights = weights or {}
    for stage, weight in weights.items():
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"stage {stage!r}: managed memory weight must be >= 0, got {weight!r}")

    members: dict[str, list[str]] = defaultdict(list)
    for stage in specs:
        members[groups[stage]].append(stage)

    fractions: dict[str, float] = {}
    for stages in members.values():
        amounts: dict[str, float] = {}
        for stage in stages:
            spec = specs[stage]
            amounts[stage] = float(spec.managed_memory) if spec is not None else float(weights.get(stage, 1.0))
        fractions.update(_normalize_shares(amounts))
    return fractions


def _normalize_shares(amounts: Mapping[str, float]) -> dict[str, float]:
    total = math.fsum(amounts.values())
    if total <= 0:
        return dict.fromkeys(amounts, 0.0)
    shares = {stage: amount / total for stage, amount in amounts.items()}
    # Division rounds to nearest, so n shares of 1/n can sum to 1 + ulp; trim the largest until the
    # group's total is at most 1, so stages sharing a slot never oversubscribe it.
    while max(sum(shares.values()), math.fsum(shares.values())) > 1.0:
        largest = max(shares, key=lambda s: shares[s])
        shares[largest] = math.nextafter(shares[largest], 0.0)
    return shares
