"""Decide a run's regions again from what their traces recorded (``StageTrace.decided_from``). Pure.

``finegrained explain`` reads a run's traces from XCom and calls :func:`redecide_run`: each region is decided
again by :func:`decide_region` from the inputs and settings its stages recorded, and each stage's Spark
settings are put together as the run traced them (the decision's, plus what the launch added).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_finegrained.execution.decision.inputs import StageInputs
from airflow_provider_finegrained.execution.decision.region import decide_region
from airflow_provider_finegrained.execution.decision.session import DecisionSettings
from airflow_provider_finegrained.execution.decision.value import RegionDecision
from airflow_provider_finegrained.planning import ClusterProfile, DagPlan, LearnedExpansion, ParallelismConfig
from airflow_provider_finegrained.planning.capacity import ResourceBounds
from airflow_provider_finegrained.secrets import redact_mapping


@dataclass(frozen=True)
class Explained:
    """One stage as decided again: the fields of its trace that say what the run decided."""

    stage: str
    region: str
    decided_parallelism: int
    rule: str
    parallelism: int
    spark_conf: Mapping[str, str]
    sizing_notes: tuple[str, ...]
    jit: str = ""
    """The region's JIT and why (``planning.jit``)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "region": self.region,
            "decided_parallelism": self.decided_parallelism,
            "rule": self.rule,
            "parallelism": self.parallelism,
            "spark_conf": dict(self.spark_conf),
            "sizing_notes": list(self.sizing_notes),
            "jit": self.jit,
        }


def redecide_run(plan: DagPlan, recorded: Mapping[str, Mapping[str, Any]]) -> dict[str, Explained]:
    """Every stage of ``plan`` whose trace recorded its decision (``recorded``: stage -> ``decided_from``), decided
    again region by region; stages that recorded nothing (not run, or a run before the record) are left out."""
    explained: dict[str, Explained] = {}
    for region, members in plan.regions.items():
        if not all(m in recorded for m in members):
            continue
        decision = redecide_region(plan, region, recorded)
        for member in members:
            stage = decision.stages[member]
            conf = traced_spark_conf(decision, member, recorded[member].get("launch") or {})
            explained[member] = Explained(
                member, region, stage.decided_parallelism, stage.rule, stage.parallelism, conf,
                tuple(stage.trace.sizing_notes), f"{decision.jit.compiler}: {decision.jit.reason}",
            )  # fmt: skip
    return explained


def redecide_region(plan: DagPlan, region: str, recorded: Mapping[str, Mapping[str, Any]]) -> RegionDecision:
    """``region`` decided again from its stages' records (each holds the region's settings too)."""
    members = plan.regions[region]
    shared = recorded[members[0]]["region"]
    configs = {stage: ParallelismConfig(**config) for stage, config in shared["configs"].items()}
    bounds = shared.get("resource_bounds")
    settings = DecisionSettings(
        adaptive_query_execution=bool(shared["adaptive_query_execution"]),
        stage_spark_conf={m: dict(recorded[m].get("sql_conf") or {}) for m in members},
        output_format={m: str(recorded[m].get("output_format") or "parquet") for m in members},
        resource_bounds=None if bounds is None else ResourceBounds(**bounds),
        # Runs recorded before executors_from was recorded: a bool, and no executor before the first job.
        executors_from=str(
            shared.get("executors_from") or ("start" if shared.get("executors_from_start") else "first_job")
        ),
        jit=str(shared.get("jit") or "auto"),
    )
    learned = {m: LearnedExpansion(**recorded[m]["learned"]) for m in members if recorded[m].get("learned")}
    return decide_region(
        plan,
        region,
        {m: StageInputs.from_record(recorded[m]["inputs"]) for m in members},
        lambda stage: configs[stage],
        ClusterProfile(**shared["profile"]),
        learned,
        ran_with={k: int(v) for k, v in shared["ran_with"].items()},
        written=tuple(shared["written"]),
        settings=settings,
    )


def traced_spark_conf(decision: RegionDecision, stage: str, launch: Mapping[str, Any]) -> dict[str, str]:
    """``stage``'s Spark settings as its trace states them: the decision's application settings with what the
    launch added or left out (``execution.region_trace.launch_record``), then its session settings, secrets
    masked. A region run in an application it did not configure (a warm pool's) states its session settings."""
    session = decision.session_conf(stage)
    if not launch.get("application"):
        return dict(sorted(redact_mapping(session).items()))
    dropped = set(launch.get("dropped") or ())
    application = {k: v for k, v in decision.application_conf.items() if k not in dropped}
    return dict(sorted(redact_mapping({**application, **launch.get("conf", {}), **session}).items()))
