"""Every XCom the provider writes, in one place: the keys, and what goes under each.

A stage task writes its plan first (the UI draws the DAG's regions from it), a Spark UI link target, and
when it succeeds its trace and output record; a region's leader also writes where the region's results
are (the region folder) and, when the region fails, which stage broke. Nothing else writes XCom.

Every value goes through Airflow's secrets masker first, as the task log does: a secret the task registered
(a connection's password, a secret Spark setting) that reached an error text or a trace is written as ``***``.
Airflow masks rendered fields and logs, not XCom.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from airflow_provider_finegrained.contract import OUTPUT_KEY, PLAN_KEY, REGION_KEY, TRACE_KEY, OutputRecord, StageTrace
from airflow_provider_finegrained.launchers.links import SparkUITargets

__all__ = [
    "REGION_FAILURE_KEY",
    "SPARK_UI_KEY",
    "XComWriter",
    "push_live_link",
    "push_plan",
    "push_region_failure",
    "push_region_info",
    "push_spark_ui",
    "push_stage_result",
]

SPARK_UI_KEY = "finegrained_spark_ui"
"""XCom of every stage: its application id and the URLs the link chooses from (:class:`SparkUITargets`)."""

REGION_FAILURE_KEY = "finegrained_region_failure"
"""XCom the leader pushes when its region fails: the stage that broke and why, for the region's other tasks."""


class XComWriter(Protocol):
    """The task instance's XCom write (Airflow's ``ti.xcom_push``)."""

    def xcom_push(self, key: str, value: Any) -> None: ...


def masked(value: Any) -> Any:
    """``value`` with every registered secret in its strings replaced (keys and structure unchanged: a field
    merely named like a secret, ``tokens`` say, keeps its value)."""
    from airflow.sdk._shared.secrets_masker import redact

    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {key: masked(item) for key, item in value.items()}
    if isinstance(value, list):
        return [masked(item) for item in value]
    if isinstance(value, tuple):
        return tuple(masked(item) for item in value)
    return value


def _push(ti: XComWriter, key: str, value: Any) -> Any:
    value = masked(value)
    ti.xcom_push(key=key, value=value)
    return value


def push_plan(ti: XComWriter, plan: Mapping[str, Any]) -> None:
    """The DAG's plan (``plan_to_dict``), for the UI's region view."""
    _push(ti, PLAN_KEY, plan)


def push_spark_ui(ti: XComWriter, targets: SparkUITargets | Mapping[str, Any]) -> None:
    """Where the stage's Spark UI link points (targets, or their XCom form as another task stored them)."""
    _push(ti, SPARK_UI_KEY, targets.to_xcom() if isinstance(targets, SparkUITargets) else targets)


def push_live_link(ti: XComWriter, targets: SparkUITargets, link_key: str) -> None:
    """The live target as the link's XCom (``link_key``) while the application runs (finalize replaces it)."""
    push_spark_ui(ti, targets)
    link = targets.live_target()
    if link:
        _push(ti, link_key, link)


def push_region_failure(ti: XComWriter, stage: str, error: str, spark_ui: Mapping[str, Any] | None) -> None:
    """Which stage of the leader's region broke and why (its first line), for the region's other tasks."""
    _push(ti, REGION_FAILURE_KEY, {"stage": stage, "error": error, "spark_ui": spark_ui})


def push_region_info(
    ti: XComWriter, region: str, folder: str, leader: str, try_number: int, stages: Sequence[str]
) -> None:
    """Where the region's other tasks find its results (the folder of the try whose application ran)."""
    _push(
        ti,
        REGION_KEY,
        {"region": region, "folder": folder, "leader": leader, "try_number": try_number, "stages": list(stages)},
    )


def push_stage_result(ti: XComWriter, record: OutputRecord, trace: StageTrace) -> dict[str, Any]:
    """A succeeded stage's trace and output record; returns the record's XCom value (the task's return value)."""
    _push(ti, TRACE_KEY, trace.to_xcom())
    return dict(_push(ti, OUTPUT_KEY, record.to_xcom()))
