"""A region's decision as one immutable value, read unchanged by every consumer. Pure.

The launch reads its application settings and sizing, the driver each stage's session settings (through the
region job), the trace each stage's decided trace, the UI and ``finegrained report`` the traces, and
``finegrained size`` / ``explain`` and the benchmarks the value itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_finegrained.contract import StageTrace
from airflow_provider_finegrained.execution.decision.session import DecisionSettings
from airflow_provider_finegrained.execution.executor_lifecycle import executor_lifecycle_conf
from airflow_provider_finegrained.planning import ClusterProfile, RegionSizing, ResourceSpec
from airflow_provider_finegrained.planning.jit import JitDecision, decide_jit
from airflow_provider_finegrained.planning.stage_sizing import StageSizing


@dataclass(frozen=True)
class StageDecision:
    """One stage's decision: its parallelism and the rule that gave it, its session settings, scans, resources."""

    stage: str
    decided_parallelism: int
    """What the decider gave (fixed, inherited from its forward group, or from its bytes)."""
    rule: str
    parallelism: int
    """After sizing (memory floor, even waves, its forward group's leader): what the stage runs with."""
    sizing: StageSizing
    """Waves, scan split, memory floor and the input balance over its tasks."""
    session_conf: Mapping[str, str]
    """Every session setting the stage runs with (decided, AQE, its own ``spark.sql.*``)."""
    scans_of: str
    """The stage whose file scans run in this stage's jobs (itself, or a handed-over producer)."""
    runs_in: str | None
    """The in-region consumer whose Spark jobs run its plan (an in-memory handover), else None."""
    write_options: Mapping[str, str]
    """Its writer's options (parquet row groups its consumers' splits can cut)."""
    resources: ResourceSpec | None
    trace: StageTrace
    """Its decided trace (what the run adds comes in ``execution.region_trace.stage_trace``)."""

    @property
    def input_balance(self) -> Mapping[str, Any] | None:
        return self.trace.input_balance


@dataclass(frozen=True)
class RegionDecision:
    """Everything decided for one region before it runs."""

    region: str
    leader: str
    sizing: RegionSizing
    """The application's shape and every stage's sizing, followers aligned with their forward group."""
    stages: Mapping[str, StageDecision]
    """In region order."""
    in_region_consumers: Mapping[str, tuple[str, ...]]
    outside_consumers: Mapping[str, tuple[str, ...]]
    written: frozenset[str]
    """Stages with an ``output_path``: written by a job of their own even when only in-region stages read them."""
    profile: ClusterProfile
    """The cluster profile it was sized for."""
    settings: DecisionSettings

    @property
    def members(self) -> tuple[str, ...]:
        return tuple(self.stages)

    @property
    def traces(self) -> dict[str, StageTrace]:
        """Each stage's decided trace (a new dict; the traces are frozen)."""
        return {name: stage.trace for name, stage in self.stages.items()}

    @property
    def read_bytes(self) -> int:
        """What the region's stages read in all: every stage's consumed bytes (its inputs, as decided from)."""
        return sum(sum(stage.trace.consumed_bytes.values()) for stage in self.stages.values())

    @property
    def jit(self) -> JitDecision:
        """The compilers its JVMs run (``planning.jit``): from the bytes read per task slot unless set."""
        return decide_jit(self.settings.jit, self.read_bytes, max(1, self.sizing.slots))

    def session_conf(self, stage: str) -> dict[str, str]:
        return dict(self.stages[stage].session_conf)

    @property
    def application_conf(self) -> dict[str, str]:
        """The region's application settings: executor shape and memory model, and on a cluster the executors'
        lifecycle (dynamic allocation within the decision and the minimum resources). Raises ValueError when
        the minimum and maximum resources cannot both hold in whole executors of this shape."""
        conf = self.sizing.application_conf()
        if self.settings.resource_bounds is not None:
            conf.update(
                executor_lifecycle_conf(self.settings.resource_bounds, self.sizing, self.settings.executors_from)
            )
        return conf
