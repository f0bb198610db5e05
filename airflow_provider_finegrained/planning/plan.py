"""Plan a DAG of stages: regions, forward groups, slot sharing groups and memory fractions.

This is what runs at parse time: everything here depends only on the declarations, not on data.
Every error is a :class:`StageGraphError` that names the stages involved.
"""

from __future__ import annotations

import gc
import graphlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from airflow_provider_finegrained.planning.enums import Distribution, ExchangeMode
from airflow_provider_finegrained.planning.forward_groups import (
    UNDECIDED,
    compute_forward_groups,
    intersect_bounds,
    propagate_forward_parallelism,
)
from airflow_provider_finegrained.planning.regions import compute_pipelined_regions
from airflow_provider_finegrained.planning.resources import (
    ResourceSpec,
    check_specs_not_mixed,
    managed_memory_fractions,
)
from airflow_provider_finegrained.planning.stages import StageGraphError, StageInput, StageSpec

_NO_MAX = 2**31 - 1
"""Stands for an undeclared max_parallelism when intersecting a forward group's bounds."""


@dataclass(frozen=True)
class Exchange:
    producer: str
    consumer: str
    mode: ExchangeMode
    distribution: Distribution
    input_name: str


@dataclass(frozen=True)
class StagePlan:
    """The parse-time plan of one stage."""

    name: str
    region: str
    forward_group: int
    slot_sharing_group: str
    memory_fraction: float
    resources: ResourceSpec | None
    fixed_parallelism: int | None
    """Fixed by the user, or inherited from a fixed stage of the same forward group."""
    min_parallelism: int | None
    max_parallelism: int | None
    inputs: tuple[Exchange, ...]


@dataclass(frozen=True)
class DagPlan:
    """A DAG's stages grouped into regions (in topological order) and forward groups."""

    dag_id: str
    stages: dict[str, StagePlan]
    regions: dict[str, tuple[str, ...]]
    forward_groups: tuple[tuple[str, ...], ...]
    exchanges: tuple[Exchange, ...]

    def region_of(self, stage: str) -> tuple[str, ...]:
        return self.regions[self.stages[stage].region]


def plan_stages(specs: Iterable[StageSpec], *, dag_id: str = "", all_sources_in_one_region: bool = False) -> DagPlan:
    """Validate stage declarations and compute the parse-time plan."""
    # Planning allocates many small, long-lived objects; the cyclic GC would rescan all of them on
    # every collection, making large DAGs superlinear. Nothing here creates reference cycles.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _plan(specs, dag_id, all_sources_in_one_region)
    finally:
        if was_enabled:
            gc.enable()


def _plan(specs: Iterable[StageSpec], dag_id: str, all_sources_in_one_region: bool) -> DagPlan:
    by_name = _index(specs)
    names = list(by_name)
    exchanges = tuple(_exchanges(by_name))
    _check_acyclic(names, exchanges)
    try:
        check_specs_not_mixed({n: s.resources for n, s in by_name.items()})
    except ValueError as exc:
        raise StageGraphError(str(exc)) from exc
    for spec in by_name.values():
        _check_bounds(spec)

    regions = compute_pipelined_regions(
        names,
        ((e.producer, e.consumer, e.mode) for e in exchanges),
        all_sources_in_one_region=all_sources_in_one_region,
    )
    position = {n: i for i, n in enumerate(names)}
    region_names = {f"region-{i + 1}": tuple(sorted(r, key=position.__getitem__)) for i, r in enumerate(regions)}
    region_of = {stage: rn for rn, members in region_names.items() for stage in members}
    groups = _slot_sharing_groups(by_name, region_names)

    forward = compute_forward_groups(names, ((e.producer, e.consumer, e.distribution) for e in exchanges))
    fixed = {n: s.parallelism for n, s in by_name.items() if s.parallelism is not None}
    try:
        propagated = propagate_forward_parallelism(forward, fixed)
    except ValueError as exc:
        raise StageGraphError(f"conflicting forward group: {exc}") from exc
    forward_sorted = tuple(
        sorted((tuple(sorted(g, key=position.__getitem__)) for g in forward), key=lambda g: position[g[0]])
    )
    forward_of = {stage: i for i, group in enumerate(forward_sorted) for stage in group}
    for group in forward_sorted:
        _check_forward_bounds(group, by_name, propagated)

    fractions = managed_memory_fractions(
        {n: s.resources for n, s in by_name.items()},
        groups,
        weights={n: s.memory_weight for n, s in by_name.items()},
    )
    inputs_of: dict[str, list[Exchange]] = {}
    for e in exchanges:
        inputs_of.setdefault(e.consumer, []).append(e)
    stages = {
        n: StagePlan(
            name=n,
            region=region_of[n],
            forward_group=forward_of[n],
            slot_sharing_group=groups[n],
            memory_fraction=fractions[n],
            resources=s.resources,
            fixed_parallelism=None if propagated.get(n, UNDECIDED) == UNDECIDED else propagated[n],
            min_parallelism=s.min_parallelism,
            max_parallelism=s.max_parallelism,
            inputs=tuple(inputs_of.get(n, ())),
        )
        for n, s in by_name.items()
    }
    return DagPlan(dag_id, stages, region_names, forward_sorted, exchanges)


def _index(specs: Iterable[StageSpec]) -> dict[str, StageSpec]:
    by_name: dict[str, StageSpec] = {}
    for spec in specs:
        if spec.name in by_name:
            raise StageGraphError(f"two stages are named {spec.name!r}")
        by_name[spec.name] = spec
    return by_name


def _exchanges(by_name: dict[str, StageSpec]) -> Iterable[Exchange]:
    for spec in by_name.values():
        seen: set[str] = set()
        for stage_input in spec.inputs:
            _check_input(spec, stage_input, by_name, seen)
            yield Exchange(
                stage_input.upstream, spec.name, stage_input.mode, stage_input.distribution, stage_input.input_name
            )


def _check_input(spec: StageSpec, inp: StageInput, by_name: dict[str, StageSpec], seen: set[str]) -> None:
    if inp.upstream not in by_name:
        raise StageGraphError(
            f"stage {spec.name!r} reads input {inp.input_name!r} from {inp.upstream!r}, "
            "which is not a stage of this DAG"
        )
    if inp.upstream == spec.name:
        raise StageGraphError(f"stage {spec.name!r} reads its own output")
    if inp.input_name in seen:
        raise StageGraphError(f"stage {spec.name!r} has two inputs named {inp.input_name!r}")
    seen.add(inp.input_name)


def _check_acyclic(names: list[str], exchanges: Sequence[Exchange]) -> None:
    predecessors: dict[str, set[str]] = {n: set() for n in names}
    for e in exchanges:
        predecessors[e.consumer].add(e.producer)
    try:
        graphlib.TopologicalSorter(predecessors).prepare()
    except graphlib.CycleError as exc:
        cycle = sorted(set(exc.args[1]))
        raise StageGraphError(f"stages {cycle} read from each other in a cycle") from exc


def _check_bounds(spec: StageSpec) -> None:
    low, high, fixed = spec.min_parallelism, spec.max_parallelism, spec.parallelism
    for label, value in (("parallelism", fixed), ("min_parallelism", low), ("max_parallelism", high)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise StageGraphError(f"stage {spec.name!r}: {label} must be an integer >= 1, got {value!r}")
    if low is not None and high is not None and low > high:
        raise StageGraphError(f"stage {spec.name!r}: min_parallelism ({low}) is above max_parallelism ({high})")
    if fixed is not None and ((low is not None and fixed < low) or (high is not None and fixed > high)):
        raise StageGraphError(
            f"stage {spec.name!r}: parallelism {fixed} is outside [min_parallelism, max_parallelism] = [{low}, {high}]"
        )


def _check_forward_bounds(group: Sequence[str], by_name: dict[str, StageSpec], decided: dict[str, int]) -> None:
    """A forward group runs at one parallelism, so its members' bounds must overlap (and hold it)."""
    if len(group) < 2:
        return
    try:
        bounds = intersect_bounds(
            {s: (by_name[s].min_parallelism or 1, by_name[s].max_parallelism or _NO_MAX) for s in group}
        )
    except ValueError as exc:
        raise StageGraphError(str(exc)) from exc
    value = decided.get(group[0], UNDECIDED)
    if value != UNDECIDED and not bounds.low <= value <= bounds.high:
        stage = bounds.low_stage if value < bounds.low else bounds.high_stage
        spec = by_name[stage]
        raise StageGraphError(
            f"forward group {list(group)} runs at the fixed parallelism {value}, outside stage "
            f"{stage!r}'s bounds [{spec.min_parallelism}, {spec.max_parallelism}]"
        )


def _slot_sharing_groups(by_name: dict[str, StageSpec], regions: dict[str, tuple[str, ...]]) -> dict[str, str]:
    """One group per region unless the user named one; a region must not be split across groups."""
    groups: dict[str, str] = {}
    for region, members in regions.items():
        named = {by_name[m].slot_sharing_group for m in members} - {None}
        if len(named) > 1:
            a, b = sorted(named)[:2]  # type: ignore[type-var]
            stage_a = next(m for m in members if by_name[m].slot_sharing_group == a)
            stage_b = next(m for m in members if by_name[m].slot_sharing_group == b)
            raise StageGraphError(
                f"stages {stage_a!r} (slot sharing group {a!r}) and {stage_b!r} (group {b!r}) are "
                f"pipelined into one region ({list(members)}), which runs as one Spark application; "
                "give them the same slot_sharing_group or make the exchange between them blocking"
            )
        group = next(iter(named)) if named else region
        for member in members:
            groups[member] = group  # type: ignore[assignment]
    return groups
