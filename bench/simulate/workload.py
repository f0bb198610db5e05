"""A day's workload: DAG runs of TPC-H-shaped and generated DAGs, arriving over a window.

A run is a DAG shape (stage specs, planned once per shape by the real ``plan_stages``) with bytes:
each stage reads its external inputs and its upstreams' outputs, and writes a fraction of what it
read. Input sizes are log-uniform over ``decades`` orders of magnitude (on a grid of ``scale_steps``
points). Stages are taken in spec order, which is topological for both kinds of DAG.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

from airflow_provider_finegrained.planning import (
    DagPlan,
    Distribution,
    ExchangeMode,
    StageInput,
    StageSpec,
    plan_stages,
)
from bench.simulate.tpch import (
    MIN_TABLE_BYTES,
    OUTPUT_FRACTION,
    PIPELINED,
    STAGE_INPUTS,
    TABLE_BYTES_SF1,
    parse_input,
)

EDGE_KINDS = (
    (ExchangeMode.BLOCKING, Distribution.ALL_TO_ALL, 0.6),
    (ExchangeMode.PIPELINED, Distribution.FORWARD, 0.15),
    (ExchangeMode.PIPELINED, Distribution.ALL_TO_ALL, 0.1),
    (ExchangeMode.BLOCKING, Distribution.BROADCAST, 0.15),
)
"""A generated DAG's exchanges: (mode, distribution, share of the edges)."""


@dataclass(frozen=True)
class DagShape:
    """A DAG's stages, its plan, the external inputs of each stage and each stage's output fraction."""

    name: str
    specs: tuple[StageSpec, ...]
    plan: DagPlan
    external: Mapping[str, tuple[str, ...]]
    """stage -> the external inputs (tables) it scans."""
    output_fraction: Mapping[str, float]


@dataclass(frozen=True)
class DagRun:
    run_id: int
    arrival: float
    shape: DagShape
    table_bytes: Mapping[str, float]
    """external input name -> bytes."""
    scale: float
    """The input-size factor this run was drawn with (TPC-H: the scale factor)."""

    def stage_bytes(self) -> tuple[dict[str, float], dict[str, float]]:
        """Each stage's input and output bytes, in the plan's stage order (topological)."""
        inputs: dict[str, float] = {}
        outputs: dict[str, float] = {}
        # A generated DAG's stage reads about three upstream outputs; without a cap, bytes would grow
        # geometrically with depth. No stage writes more than twice the run's tables.
        cap = 2 * sum(self.table_bytes.values())
        for name, stage in self.shape.plan.stages.items():
            read = sum(self.table_bytes[t] for t in self.shape.external.get(name, ()))
            read += sum(outputs[e.producer] for e in stage.inputs)
            inputs[name] = read
            outputs[name] = min(cap, read * self.shape.output_fraction[name])
        return inputs, outputs


@cache
def tpch_shape() -> DagShape:
    """The 8-stage TPC-H pipeline of :mod:`bench.simulate.tpch` (pipelined edges as declared)."""
    specs = []
    external: dict[str, tuple[str, ...]] = {}
    for stage, refs in STAGE_INPUTS.items():
        inputs = []
        tables = []
        for param, ref in refs.items():
            kind, name = parse_input(ref)
            if kind == "table":
                tables.append(name)
            else:
                mode = "pipelined" if (name, stage) in PIPELINED else "blocking"
                inputs.append(StageInput(name, mode=mode, name=param))  # type: ignore[arg-type]
        specs.append(StageSpec(stage, inputs=tuple(inputs)))
        external[stage] = tuple(tables)
    spec_tuple = tuple(specs)
    return DagShape("tpch", spec_tuple, plan_stages(spec_tuple, dag_id="tpch"), external, dict(OUTPUT_FRACTION))


def generate(n: int, seed: int = 7) -> list[StageSpec]:
    """``n`` stages, each from the fourth on reading about three earlier ones over edges drawn from EDGE_KINDS.

    The planner-scaling benchmark (bench/plan_scaling.py) plans the same DAGs.
    """
    rng = random.Random(seed)
    modes = [(m, d) for m, d, _ in EDGE_KINDS]
    weights = [w for _, _, w in EDGE_KINDS]
    specs = []
    for i in range(n):
        inputs: tuple[StageInput, ...] = ()
        if i >= 3:
            # Mostly recent stages, like a pipeline; sometimes far back, like a shared dimension.
            ups = {i - rng.randint(1, min(i, 20)) if rng.random() < 0.9 else rng.randrange(i) for _ in range(3)}
            inputs = tuple(
                StageInput(f"s{u}", *rng.choices(modes, weights)[0], name=f"in{k}") for k, u in enumerate(sorted(ups))
            )
        specs.append(StageSpec(name=f"s{i}", inputs=inputs))
    return specs


@cache
def generated_shape(stages: int, seed: int) -> DagShape:
    """A generated DAG (:func:`generate`): its first three stages scan one table each."""
    specs = tuple(generate(stages, seed=seed))
    rng = random.Random(seed)
    external = {s.name: (f"t{s.name}",) for s in specs if not s.inputs}
    fractions = {s.name: rng.choice((0.05, 0.2, 0.5, 1.0)) for s in specs}
    return DagShape(f"gen{stages}-{seed}", specs, plan_stages(specs, dag_id=f"gen{stages}-{seed}"), external, fractions)


def tpch_tables(scale: float) -> dict[str, float]:
    return {t: max(MIN_TABLE_BYTES, b * scale) for t, b in TABLE_BYTES_SF1.items()}


def tpch_run(run_id: int, arrival: float, scale: float) -> DagRun:
    return DagRun(run_id, arrival, tpch_shape(), tpch_tables(scale), scale)


@dataclass(frozen=True)
class WorkloadSpec:
    """How a day's runs are drawn."""

    runs: int = 10_000
    window_s: float = 86_400.0
    tpch_share: float = 0.5
    min_scale: float = 0.01
    decades: float = 4.0
    """Input sizes are log-uniform over [min_scale, min_scale x 10^decades] (TPC-H scale factors)."""
    scale_steps: int = 64
    """Scales are drawn from a log grid of this many points (runs at one point share planner decisions)."""
    generated_shapes: int = 10
    generated_stages: tuple[int, int] = (5, 30)
    generated_table_bytes_sf1: float = 100 * 2**20
    """A generated DAG's source table at scale 1."""
    diurnal: bool = True
    """Arrival rate varying over the window as 1 + 0.8 sin (busier in the day's second quarter)."""

    def __post_init__(self) -> None:
        if self.runs < 1 or self.window_s <= 0 or not 0 <= self.tpch_share <= 1:
            raise ValueError(
                f"workload runs must be >= 1, window_s > 0 and tpch_share in [0, 1]; got {self.runs}, "
                f"{self.window_s}, {self.tpch_share}"
            )
        if self.scale_steps < 1:
            raise ValueError(f"workload scale_steps must be >= 1, got {self.scale_steps}")
        if self.min_scale <= 0 or self.decades < 0:
            raise ValueError(f"workload min_scale must be > 0 and decades >= 0; got {self.min_scale}, {self.decades}")


def day_workload(spec: WorkloadSpec, seed: int) -> list[DagRun]:
    """``spec.runs`` runs in order of arrival: Poisson arrivals (thinned for the diurnal shape)."""
    rng = random.Random(seed)
    arrivals = sorted(_arrival(rng, spec) for _ in range(spec.runs))
    low, high = spec.generated_stages
    shapes = [generated_shape(rng.randint(low, high), seed * 1000 + k) for k in range(spec.generated_shapes)]
    runs = []
    for run_id, arrival in enumerate(arrivals):
        step = rng.randrange(spec.scale_steps)
        scale = spec.min_scale * 10 ** (spec.decades * step / max(1, spec.scale_steps - 1))
        if rng.random() < spec.tpch_share:
            runs.append(tpch_run(run_id, arrival, scale))
        else:
            shape = rng.choice(shapes)
            tables = {t: spec.generated_table_bytes_sf1 * scale for ts in shape.external.values() for t in ts}
            runs.append(DagRun(run_id, arrival, shape, tables, scale))
    return runs


def _arrival(rng: random.Random, spec: WorkloadSpec) -> float:
    """Uniform order statistics are a Poisson process's arrival times given their count; thinning shapes them."""
    while True:
        t = rng.uniform(0, spec.window_s)
        if not spec.diurnal or rng.random() * 1.8 <= 1 + 0.8 * math.sin(2 * math.pi * t / spec.window_s):
            return t
