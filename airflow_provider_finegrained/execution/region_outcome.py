"""How a region run ends, as one frozen value the operator maps to publish, defer or raise.

``Succeeded`` (each stage's output record and trace), ``AwaitCapacity`` (the cluster cannot take the region
now; the operator defers until it can), ``AwaitApplication`` (a cluster-mode application runs on; the
operator defers to the trigger that follows it) or ``Failed`` (``final``: retrying cannot help).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from airflow_provider_finegrained.execution.capacity_gate import CapacityImpossible, CapacityWait
from airflow_provider_finegrained.execution.region_context import RegionDeferral, RunFacts, Succeeded
from airflow_provider_finegrained.launchers.base import LaunchHandle

__all__ = ["AwaitApplication", "AwaitCapacity", "Failed", "RegionOutcome", "Succeeded", "outcome_of"]


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


def outcome_of(run: Callable[[], Succeeded]) -> RegionOutcome:
    """Run a region's sequence (start or reattach, wait, collect) and say how it ended."""
    try:
        return run()
    except CapacityImpossible as exc:
        return Failed(exc, final=True)
    except CapacityWait as exc:
        return AwaitCapacity(exc)
    except RegionDeferral as deferral:
        return AwaitApplication(deferral.handle, deferral.facts)
    except Exception as exc:
        return Failed(exc)
