"""Plan a DAG of stages: regions, forward groups, slot sharing groups and memory fractions.

This is what runs at parse time: everything here depends only on the declarations, not on data.
Every error is a :class:`StageGraphError` that names the stages involved.
"""

from __future__ import annotations

import gc
import graphlib
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields

from airflow_provider_finegrained.planning._index_graph import component_labels, is_acyclic, members_by_label
from airflow_provider_finegrained.planning.enums import Distribution, ExchangeMode
from airflow_provider_finegrained.planning.forward_groups import (
    UNDECIDED,
    intersect_bounds,
    propagate_forward_parallelism,
)
from airflow_provider_finegrained.planning.regions import region_members
from airflow_provider_finegrained.planning.resources import ResourceSpec, check_specs_not_mixed, shares_of
from airflow_provider_finegrained.planning.stages import StageGraphError, StageInput, StageSpec

_NO_MAX = 2**31 - 1
"""Stands for an undeclared max_parallelism when intersecting a forward group's bounds."""


@dataclass(frozen=True, slots=True)
class Exchange:
    producer: str
    consumer: str
    mode: ExchangeMode
    distribution: Distribution
    input_name: str


@dataclass(frozen=True, slots=True)
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


# A frozen dataclass's __init__ sets each field through object.__setattr__, which makes building the
# 100,000s of exchanges and stage plans of a large DAG about half of planning. The planner fills the
# slots directly instead (the same objects, equal to and hashing like ones built by __init__).
_new = object.__new__
_set_producer, _set_consumer, _set_mode, _set_distribution, _set_input_name = (
    getattr(Exchange, f.name).__set__ for f in fields(Exchange)
)
(
    _set_name,
    _set_region,
    _set_forward_group,
    _set_slot_sharing_group,
    _set_memory_fraction,
    _set_resources,
    _set_fixed_parallelism,
    _set_min_parallelism,
    _set_max_parallelism,
    _set_inputs,
) = (getattr(StagePlan, f.name).__set__ for f in fields(StagePlan))


def _stage_plan(
    name: str,
    region: str,
    forward_group: int,
    slot_sharing_group: str,
    memory_fraction: float,
    resources: ResourceSpec | None,
    fixed_parallelism: int | None,
    min_parallelism: int | None,
    max_parallelism: int | None,
    inputs: tuple[Exchange, ...],
) -> StagePlan:
    """``StagePlan(...)`` with every field, built faster."""
    stage: StagePlan = _new(StagePlan)
    _set_name(stage, name)
    _set_region(stage, region)
    _set_forward_group(stage, forward_group)
    _set_slot_sharing_group(stage, slot_sharing_group)
    _set_memory_fraction(stage, memory_fraction)
    _set_resources(stage, resources)
    _set_fixed_parallelism(stage, fixed_parallelism)
    _set_min_parallelism(stage, min_parallelism)
    _set_max_parallelism(stage, max_parallelism)
    _set_inputs(stage, inputs)
    return stage


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
    # Stages are numbered by their position and every graph step works on lists of those numbers:
    # at 100,000 stages, dictionaries of names and graph-library objects cost several times more.
    stage_list, position = _index(specs)
    names = [spec.name for spec in stage_list]
    n = len(names)
    inputs_of, edges = _exchanges(stage_list, position)
    exchanges = tuple(itertools.chain.from_iterable(inputs_of))
    if not is_acyclic(n, edges.producers, edges.consumers):
        _check_acyclic(names, exchanges)  # names the cycle exactly as graphlib finds it
    resources = [spec.resources for spec in stage_list]
    if len({r is None for r in resources}) > 1:
        try:
            check_specs_not_mixed(dict(zip(names, resources, strict=True)))
        except ValueError as exc:
            raise StageGraphError(str(exc)) from exc
    bounded: list[int] = []  # stages declaring min or max parallelism
    for i, spec in enumerate(stage_list):
        if spec.parallelism is not None or spec.min_parallelism is not None or spec.max_parallelism is not None:
            _check_bounds(spec)
            if spec.min_parallelism is not None or spec.max_parallelism is not None:
                bounded.append(i)

    sources = [i for i, stage_inputs in enumerate(inputs_of) if not stage_inputs] if all_sources_in_one_region else None
    regions = region_members(n, edges.producers, edges.consumers, edges.pipelined, sources)
    region_names = {f"region-{k + 1}": tuple([names[i] for i in members]) for k, members in enumerate(regions)}
    region_of = [""] * n
    for region_name, members in zip(region_names, regions, strict=True):
        for i in members:
            region_of[i] = region_name
    groups = _slot_sharing_groups(stage_list, region_names, regions)

    # Groups come in the order of their first stage, members in stage order.
    forward_of, forward_count = component_labels(n, edges.forward)
    forward_groups = tuple(map(tuple, members_by_label(forward_of, forward_count, names)))
    fixed = {spec.name: spec.parallelism for spec in stage_list if spec.parallelism is not None}
    # A group without a fixed stage stays undecided, so only groups holding one need propagating.
    fixed_groups = sorted({forward_of[position[name]] for name in fixed})
    try:
        propagated = propagate_forward_parallelism((forward_groups[g] for g in fixed_groups), fixed)
    except ValueError as exc:
        raise StageGraphError(f"conflicting forward group: {exc}") from exc
    # A group whose members declare no bounds and that holds no fixed stage cannot fail the check.
    for g in sorted({forward_of[i] for i in bounded}.union(fixed_groups)):
        group = forward_groups[g]
        if len(group) > 1:
            _check_forward_bounds(group, [stage_list[position[s]] for s in group], propagated)

    # FLIP-53 computes fractions per pipelined region within a slot sharing group: only stages that may
    # run at the same time share a slot's memory. A region lies in one group, so that is per region; a
    # user's group spanning regions (which run one after the other) does not shrink their fractions.
    fractions = _memory_fractions(stage_list, regions)
    stages = {}
    for spec, region, forward_group, group, fraction, stage_inputs in zip(
        stage_list, region_of, forward_of, groups, fractions, inputs_of, strict=True
    ):
        name = spec.name
        decided = propagated.get(name, UNDECIDED) if propagated else UNDECIDED
        stages[name] = _stage_plan(
            name,
            region,
            forward_group,
            group,
            fraction,
            spec.resources,
            None if decided == UNDECIDED else decided,
            spec.min_parallelism,
            spec.max_parallelism,
            stage_inputs,
        )
    return DagPlan(dag_id, stages, region_names, forward_groups, exchanges)


def _index(specs: Iterable[StageSpec]) -> tuple[list[StageSpec], dict[str, int]]:
    stage_list: list[StageSpec] = []
    position: dict[str, int] = {}
    for spec in specs:
        if spec.name in position:
            raise StageGraphError(f"two stages are named {spec.name!r}")
        position[spec.name] = len(stage_list)
        stage_list.append(spec)
    return stage_list, position


@dataclass
class _Edges:
    """Every exchange as stage indices, and the pipelined and forward ones again as pairs."""

    producers: list[int]
    consumers: list[int]
    pipelined: list[tuple[int, int]]
    forward: list[tuple[int, int]]


def _exchanges(stage_list: Sequence[StageSpec], position: dict[str, int]) -> tuple[list[tuple[Exchange, ...]], _Edges]:
    """Check every stage's inputs; return each stage's exchanges and all of them as index edges."""
    edges = _Edges([], [], [], [])
    add_producer, add_consumers, position_of = edges.producers.append, edges.consumers.extend, position.get
    add_pipelined, add_forward = edges.pipelined.append, edges.forward.append
    pipelined, forward = ExchangeMode.PIPELINED, Distribution.FORWARD
    inputs_of: list[tuple[Exchange, ...]] = []
    new, set_producer, set_consumer, set_mode = _new, _set_producer, _set_consumer, _set_mode
    set_distribution, set_input_name = _set_distribution, _set_input_name
    for consumer, spec in enumerate(stage_list):
        stage_inputs = spec.inputs
        if not stage_inputs:
            inputs_of.append(())
            continue
        stage = spec.name
        seen: set[str] = set()
        built = []
        add_consumers([consumer] * len(stage_inputs))
        for stage_input in stage_inputs:
            upstream = stage_input.upstream
            input_name = stage_input.name or upstream  # StageInput.input_name, without the property call
            producer = position_of(upstream)
            if producer is None or producer == consumer or input_name in seen:
                raise _input_error(spec, stage_input, position, seen)
            seen.add(input_name)
            add_producer(producer)
            mode, distribution = stage_input.mode, stage_input.distribution
            if mode is pipelined:
                add_pipelined((producer, consumer))
            if distribution is forward:
                add_forward((producer, consumer))
            exchange = new(Exchange)  # Exchange(upstream, stage, mode, distribution, input_name), inlined
            set_producer(exchange, upstream)
            set_consumer(exchange, stage)
            set_mode(exchange, mode)
            set_distribution(exchange, distribution)
            set_input_name(exchange, input_name)
            built.append(exchange)
        inputs_of.append(tuple(built))
    return inputs_of, edges


def _input_error(spec: StageSpec, inp: StageInput, position: dict[str, int], seen: set[str]) -> StageGraphError:
    """The first thing wrong with an input (the caller has found one)."""
    if inp.upstream not in position:
        return StageGraphError(
            f"stage {spec.name!r} reads input {inp.input_name!r} from {inp.upstream!r}, "
            "which is not a stage of this DAG"
        )
    if inp.upstream == spec.name:
        return StageGraphError(f"stage {spec.name!r} reads its own output")
    if inp.input_name in seen:
        return StageGraphError(f"stage {spec.name!r} has two inputs named {inp.input_name!r}")
    raise AssertionError(f"input {inp.input_name!r} of stage {spec.name!r} has nothing wrong")


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


def _check_forward_bounds(group: Sequence[str], specs: Sequence[StageSpec], decided: dict[str, int]) -> None:
    """A forward group runs at one parallelism, so its members' bounds must overlap (and hold it)."""
    try:
        bounds = intersect_bounds({s.name: (s.min_parallelism or 1, s.max_parallelism or _NO_MAX) for s in specs})
    except ValueError as exc:
        raise StageGraphError(str(exc)) from exc
    value = decided.get(group[0], UNDECIDED)
    if value != UNDECIDED and not bounds.low <= value <= bounds.high:
        stage = bounds.low_stage if value < bounds.low else bounds.high_stage
        spec = next(s for s in specs if s.name == stage)
        raise StageGraphError(
            f"forward group {list(group)} runs at the fixed parallelism {value}, outside stage "
            f"{stage!r}'s bounds [{spec.min_parallelism}, {spec.max_parallelism}]"
        )


def _slot_sharing_groups(
    specs: Sequence[StageSpec], region_names: dict[str, tuple[str, ...]], regions: Sequence[list[int]]
) -> list[str]:
    """Each stage's group (by index).

    One group per region unless the user named one; a region is never split across groups.
    """
    groups = [""] * len(specs)
    for (region, names), indices in zip(region_names.items(), regions, strict=True):
        named = {specs[i].slot_sharing_group for i in indices} - {None}
        if len(named) > 1:
            a, b = sorted(named)[:2]  # type: ignore[type-var]
            stage_a = next(specs[i].name for i in indices if specs[i].slot_sharing_group == a)
            stage_b = next(specs[i].name for i in indices if specs[i].slot_sharing_group == b)
            raise StageGraphError(
                f"stages {stage_a!r} (slot sharing group {a!r}) and {stage_b!r} (group {b!r}) are "
                f"pipelined into one region ({list(names)}), which runs as one Spark application; "
                "give them the same slot_sharing_group or make the exchange between them blocking"
            )
        group: str = next(iter(named)) if named else region  # type: ignore[assignment]
        for i in indices:
            groups[i] = group
    return groups


def _memory_fractions(specs: Sequence[StageSpec], members: Iterable[Sequence[int]]) -> list[float]:
    """Each stage's managed-memory fraction among ``members`` (its region's stages), as
    :func:`managed_memory_fractions` computes it."""
    for spec in specs:
        weight = spec.memory_weight
        if not math.isfinite(weight) or weight < 0:
            # A ValueError, not a StageGraphError, as managed_memory_fractions raises it.
            raise ValueError(f"stage {spec.name!r}: managed memory weight must be >= 0, got {weight!r}")
    amounts = [
        float(spec.resources.managed_memory) if spec.resources is not None else float(spec.memory_weight)
        for spec in specs
    ]
    fractions = [0.0] * len(specs)
    for indices in members:
        if len(indices) == 1:  # what shares_of gives a group of one, without its lists
            i = indices[0]
            fractions[i] = 1.0 if amounts[i] > 0 else 0.0
            continue
        for i, share in zip(indices, shares_of([amounts[i] for i in indices]), strict=True):
            fractions[i] = share
    return fractions
