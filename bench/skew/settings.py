"""The skew experiment's variants and their settings, each from the provider's decision for the consumer.

``spark-defaults`` runs Spark's defaults; ``sizing`` the provider's decision with its balance undone;
``balance`` the provider's decision as ``finegrained size`` makes it; the row-group variants the balance's
settings over an upstream written with other row groups.
"""

from __future__ import annotations

from typing import Any

from airflow_provider_finegrained.execution.decision import adaptive_conf, write_options
from airflow_provider_finegrained.planning import ClusterProfile, ParallelismConfig
from bench.lib.session import SPARK_DEFAULTS, decide_alone

MIB = 2**20
AVG_BYTES_PER_TASK = 8 * MIB
VARIANTS = ("spark-defaults", "sizing", "balance")
"""The variants the goal compares (run by default)."""
ROW_GROUPS = "balance-128m-row-groups"
ROW_GROUP_VARIANTS = {"balance-16m-row-groups": 16 * MIB, ROW_GROUPS: None}
"""The balance over an upstream written with these row groups (None: parquet's default, the one
``spark-defaults`` reads)."""
ALL_VARIANTS = (*VARIANTS, *ROW_GROUP_VARIANTS)
SKEW_KEYS = (
    "spark.sql.adaptive.skewJoin.enabled",
    "spark.sql.adaptive.skewJoin.skewedPartitionFactor",
    "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes",
)
PROFILE = ClusterProfile(total_cores=2, total_memory=4 * 2**30, executor_memory=2 * 2**30, local=True)
"""The session's: local[2] with a 2 GiB driver."""


def producer_options() -> dict[str, str]:
    """The row groups the provider's producer writes for consumers of ``AVG_BYTES_PER_TASK`` (its decision)."""
    return write_options("parquet", [ParallelismConfig(avg_bytes_per_task=AVG_BYTES_PER_TASK)])


def decided_conf(variant: str, files: list[int], dim_files: list[int]) -> tuple[dict[str, str], dict[str, Any]]:
    """A variant's session settings and what it decided: Spark's defaults, or the provider's decision for the
    consumer over these files (``sizing``: with its balance undone)."""
    if variant == "spark-defaults":
        return dict(SPARK_DEFAULTS), {}
    config = ParallelismConfig(avg_bytes_per_task=AVG_BYTES_PER_TASK)
    stage = decide_alone("consumer", {"fact": files, "dim": dim_files}, config, PROFILE)
    sizing = stage.sizing
    decided: dict[str, Any] = {"parallelism": sizing.parallelism, "input_balance": dict(sizing.input_balance or {})}
    if variant != "sizing":
        adaptive = dict(stage.trace.input_balance["adaptive"])
        adaptive.pop("applies", None)
        return dict(stage.session_conf), decided | {"adaptive": adaptive}
    # The provider before the balance: the split from bytes / parallelism, Spark's open cost, AQE towards the
    # bytes per task with Spark's skew thresholds.
    conf = {
        **stage.session_conf,
        **adaptive_conf(True, config, None, sizing.coalesce_floor),
        "spark.sql.files.maxPartitionBytes": str(sizing.max_partition_bytes),
        **{k: SPARK_DEFAULTS[k] for k in ("spark.sql.files.openCostInBytes", *SKEW_KEYS)},
    }
    return conf, decided | {"input_balance": {}}


def reads(variant: str) -> str:
    """Which upstream ``variant`` reads (a key of :func:`bench.skew.data.write_upstreams`)."""
    if variant == "balance":
        return "balance"
    return variant if ROW_GROUP_VARIANTS.get(variant) is not None else "default"
