"""The three ways a stage is sized on the same substrate: Spark's defaults, the provider's decision, the oracle.

The provider's settings come from the provider's own code: the example DAG read into a plan
(``read_dag``), each region decided by ``decide_region`` from the measured bytes of the tables and of
the outputs upstream stages wrote in this run, and each stage's session settings and writer options taken
unchanged from that decision (``StageDecision.session_conf``, ``write_options``): exactly what a region sets
before a stage, AQE's coalesce floor included.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from bench.compare.pipeline import STAGE_INPUTS, parse_input

REPO: Final = Path(__file__).resolve().parents[2]

SPARK_DEFAULTS: Final[dict[str, str]] = {
    # Spark 4's own values, set explicitly so that nothing left in a pooled session can leak between runs.
    "spark.sql.shuffle.partitions": "200",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.parallelismFirst": "true",
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": str(64 * 2**20),
    "spark.sql.files.maxPartitionBytes": str(128 * 2**20),
    "spark.sql.files.openCostInBytes": str(4 * 2**20),
    "spark.sql.adaptive.skewJoin.skewedPartitionFactor": "5.0",
    "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": str(256 * 2**20),
}
"""Every key any policy sets, at Spark's default: each stage starts from these, then its policy's own."""


def file_sizes(path: Path) -> list[int]:
    """Sizes of a parquet file or of the data files of a folder written by Spark."""
    if path.is_file():
        return [path.stat().st_size]
    return sorted(p.stat().st_size for p in path.rglob("*.parquet") if p.is_file())


@dataclass
class ProviderSizing:
    """Decides each stage's session settings as the provider would, region by region, as the run goes."""

    tables: Path
    out: Path
    settings: Any
    aqe: bool = True
    decided: dict[str, dict[str, Any]] = field(default_factory=dict)
    _region_confs: dict[str, dict[str, str]] = field(default_factory=dict)
    _write_options: dict[str, dict[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        from airflow_provider_finegrained.dags.reader import read_dag

        if str(REPO / "dags_examples") not in sys.path:
            sys.path.insert(0, str(REPO / "dags_examples"))
        dag = importlib.import_module("tpch_pipeline").dag
        self.plan = read_dag(dag)

    def conf_for(self, stage: str) -> dict[str, str]:
        """``stage``'s session settings; its region is decided when its first stage runs (as the leader does)."""
        if stage not in self._region_confs:
            self._decide(self.plan.stages[stage].region)
        return self._region_confs[stage]

    def write_options_for(self, stage: str) -> dict[str, str]:
        """The writer options of ``stage``'s output (decided with its region)."""
        self.conf_for(stage)
        return self._write_options[stage]

    def _decide(self, region: str) -> None:
        from airflow_provider_finegrained.contract import OutputRecord
        from airflow_provider_finegrained.execution.decision import (
            DecisionSettings,
            ExternalSizes,
            StageInputs,
            decide_region,
            forward_group_peers,
        )
        from airflow_provider_finegrained.execution.measure import measure_external

        inputs: dict[str, StageInputs] = {}
        for member in self.plan.regions[region]:
            upstream: dict[str, OutputRecord] = {}
            external: dict[str, ExternalSizes] = {}
            for param, ref in STAGE_INPUTS[member].items():
                kind, name = parse_input(ref)
                if kind == "table":
                    path = self.tables / f"{name}.parquet"
                    external[param] = measure_external(str(path), "parquet")  # sizes and row groups
                elif name not in self.plan.regions[region]:
                    path = self.out / name
                    upstream[param] = OutputRecord(name, str(path), "parquet", file_sizes(path), 0, 1)
            inputs[member] = StageInputs(upstream=upstream, external=external)
        config_for = self.settings.parallelism_config
        # A forward group already decided by a region that ran keeps its value (as the runner does).
        ran_with = {
            p: int(self.decided[p]["parallelism"]) for p in forward_group_peers(self.plan, region) if p in self.decided
        }
        decision = decide_region(
            self.plan,
            region,
            inputs,
            lambda _: config_for(),
            self.settings.cluster_profile(),
            ran_with=ran_with,
            settings=DecisionSettings(adaptive_query_execution=self.aqe),
        )
        for member in self.plan.regions[region]:
            # What the region job sets before the stage: its decision's session settings and writer options.
            stage = decision.stages[member]
            sizing = stage.sizing
            self._region_confs[member] = dict(stage.session_conf)
            self._write_options[member] = dict(stage.write_options)
            trace = stage.trace
            self.decided[member] = {
                "parallelism": sizing.parallelism,
                "rule": trace.rule,
                "notes": list(sizing.notes),
                "consumed_bytes": sum(trace.consumed_bytes.values()),
            }


def oracle_conf(partitions: Mapping[str, int], stage: str) -> dict[str, str]:
    """The hand-tuned oracle: AQE off, the stage's swept shuffle partitions, Spark's default split size."""
    return {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": str(partitions[stage])}


def uniform_conf(partitions: int) -> dict[str, str]:
    """One sweep candidate: every stage with the same shuffle partitions, AQE off."""
    return {"spark.sql.adaptive.enabled": "false", "spark.sql.shuffle.partitions": str(partitions)}
