"""A region's decision: one immutable value computed by small pure steps (no Airflow or Spark imports).

:func:`decide_region` resolves the region's forward groups, decides each stage (:func:`decide_stage`, in the
spirit of Flink's ``VertexParallelismAndInputInfosDecider``), sizes the application, aligns each forward
group's followers as a new value, and gives a :class:`RegionDecision` that every consumer reads unchanged.
"""

from airflow_provider_finegrained.execution.decision.align import align_followers
from airflow_provider_finegrained.execution.decision.decider import StageChoice, decide_stage
from airflow_provider_finegrained.execution.decision.groups import GroupPlan, forward_group_peers, resolve_groups
from airflow_provider_finegrained.execution.decision.inputs import ExternalSizes, StageInputs, consumption
from airflow_provider_finegrained.execution.decision.region import decide_region
from airflow_provider_finegrained.execution.decision.session import DecisionSettings, adaptive_conf, write_options
from airflow_provider_finegrained.execution.decision.value import RegionDecision, StageDecision

__all__ = [
    "DecisionSettings",
    "ExternalSizes",
    "GroupPlan",
    "RegionDecision",
    "StageChoice",
    "StageDecision",
    "StageInputs",
    "adaptive_conf",
    "align_followers",
    "consumption",
    "decide_region",
    "decide_stage",
    "forward_group_peers",
    "resolve_groups",
    "write_options",
]
