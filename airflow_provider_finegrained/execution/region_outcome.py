"""How a region run ends, as one frozen value the operator maps to publish, defer or raise.

``Succeeded`` (each stage's output record and trace), ``AwaitCapacity`` (the cluster cannot take the region
now; the operator defers until it can), ``AwaitApplication`` (a cluster-mode application runs on; the
operator defers to the trigger that follows it) or ``Failed`` (``final``: retrying cannot help). The region's
sequence returns these; nothing in it raises to say how a region ended.
"""

from __future__ import annotations

from dataclasses import dataclass

from airflow_provider_finegrained.execution.capacity_gate import CapacityWait
from airflow_provider_finegrained.execution.region_context import RunFacts, Succeeded
from airflow_provider_finegrained.launchers.base import LaunchHandle

__all__ = ["AwaitApplication", "AwaitCapacity", "Failed", "RegionOutcome", "Succeeded"]


@dataclass(frozen=True)
class AwaitCapacity:
    """Not enough free capacity now: what was asked (``wait.request``) and why."""

    wait: CapacityWait


@dataclass(frozen=True)
class AwaitApplication:
    """The region's application runs on in the cluster; the triggerer follows it from ``handle``."""

    handle: LaunchHandle
    facts: RunFacts


@dataclass(frozen=True)
class Failed:
    """The region did not run through; ``final`` when a retry cannot help (no worker is large enough)."""

    error: Exception
    final: bool = False


RegionOutcome = Succeeded | AwaitCapacity | AwaitApplication | Failed
