"""The three ways a stage is sized on the same substrate: Spark's defaults, the provider's decision, the oracle.

Spark's defaults are :data:`bench.lib.session.SPARK_DEFAULTS`; the provider's settings come from its one
decision path (:class:`bench.lib.session.ProviderSizing`: the example DAG read into a plan, each region decided
by ``decide_region`` from the measured tables and the outputs upstream stages wrote in this run, each stage's
session settings and writer options taken unchanged from that decision, AQE's coalesce floor included); the
oracle's are the swept shuffle partitions with AQE off.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, Final

from bench.lib.pipeline import STAGES
from bench.lib.session import ProviderSizing

POLICIES: Final = ("defaults", "provider", "oracle")

ConfFor = Callable[[str], dict[str, str]]
"""A stage's settings (or writer options) under a policy."""


def oracle_conf(partitions: Mapping[str, int], stage: str) -> dict[str, str]:
    """The hand-tuned oracle: AQE off, the stage's swept shuffle partitions, Spark's default split size."""
    return {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": str(partitions[stage])}


def uniform_conf(partitions: int) -> dict[str, str]:
    """One sweep candidate: every stage with the same shuffle partitions, AQE off."""
    return {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": str(partitions)}


def policy_settings(
    name: str, settings: Any, tables: Path, out: Path, best: Mapping[str, int] | None
) -> tuple[ConfFor, ConfFor | None, dict[str, Any]]:
    """A policy's session settings and writer options per stage, and what it decided (``best``: the oracle's
    swept partitions)."""
    if name == "defaults":
        return (lambda _stage: {}), None, {}
    if name == "oracle":
        assert best is not None
        return (lambda stage: oracle_conf(best, stage)), None, {s: {"parallelism": best[s]} for s in STAGES}
    sizing = ProviderSizing(tables, out / "data", settings)
    return sizing.conf_for, sizing.write_options_for, sizing.decided  # filled in as the run decides each region
