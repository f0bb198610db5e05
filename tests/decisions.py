"""Test helpers: a region decision around a sizing, for what reads only its application settings."""

from __future__ import annotations

from airflow_provider_finegrained.execution.decision import DecisionSettings, RegionDecision
from airflow_provider_finegrained.hooks.settings import ConnectionSettings
from airflow_provider_finegrained.planning import RegionSizing


def sized_decision(sizing: RegionSizing, settings: ConnectionSettings) -> RegionDecision:
    """A decision of ``sizing`` (no stages) under the connection's resource bounds, as the runner decides."""
    return RegionDecision(
        region="region-1",
        leader="s",
        sizing=sizing,
        stages={},
        in_region_consumers={},
        outside_consumers={},
        written=frozenset(),
        profile=settings.cluster_profile(),
        settings=DecisionSettings(
            adaptive_query_execution=settings.adaptive_query_execution,
            resource_bounds=settings.resource_bounds(),
            executors_from=settings.executors_from,
            jit=settings.jit,
        ),
    )
