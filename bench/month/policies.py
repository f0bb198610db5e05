"""The month's three policies, each a small typed config whose settings reach the pipeline as a user sets them.

- ``hand``: sized by hand for the worst day, what teams do today: a spark-submit per stage with a fixed
  executor count and fixed shuffle partitions chosen for the spike day, dynamic allocation off (AQE off too,
  so the partitions stay as set: compare's fixed variant).
- ``dynamic``: Spark's defaults with dynamic allocation (shuffle tracking, 0 to ``max_executors``) and AQE
  on: shared-cluster's ``dynamic`` policy (:func:`bench.shared_cluster.policies.dynamic_conf`).
- ``provider``: the example DAG on the provider's connection, learning from history (``learn_from_history``),
  each region its own application (no warm pool), sized from the cluster's free capacity.

Both spark-submit policies pass their settings as ``--conf`` (as a SparkSubmitOperator's ``conf`` does);
the provider's go in its connection (``spark_conf`` and its fields). The provider refuses executor counts and
shuffle partitions in ``spark_conf`` (it decides them), so the first two cannot run through it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from bench.lib.spark_metrics import event_log_conf
from bench.lib.sweep import in_turn
from bench.shared_cluster.policies import Shape, dynamic_conf

PolicyName = Literal["hand", "dynamic", "provider"]
POLICY_NAMES: Final[tuple[PolicyName, ...]] = ("hand", "dynamic", "provider")
TENANT_NAME: Final = "month-tenant"
"""The other tenant's application name (its usage is not counted to any policy)."""


@dataclass(frozen=True)
class HandSized:
    """Fixed executors and shuffle partitions, chosen once for the spike day; dynamic allocation off."""

    executors: int = 4
    """The cluster's executors left beside the other tenant (8 vcores less its 2, less an application master)."""
    shuffle_partitions: int = 16
    """Four tasks per executor core at the spike's SF 1.15."""
    adaptive: bool = False
    shape: Shape = field(default_factory=Shape)

    def spark_conf(self, events: Path) -> dict[str, str]:
        return {
            "spark.dynamicAllocation.enabled": "false",
            "spark.executor.instances": str(self.executors),
            "spark.cores.max": str(self.executors * self.shape.executor_cores),
            "spark.executor.cores": str(self.shape.executor_cores),
            "spark.executor.memory": self.shape.executor_memory,
            "spark.sql.shuffle.partitions": str(self.shuffle_partitions),
            "spark.sql.adaptive.enabled": str(self.adaptive).lower(),
            "spark.pyspark.python": sys.executable,
            **event_log_conf(events),
        }


@dataclass(frozen=True)
class DynamicAllocation:
    """Spark's defaults, dynamic allocation and AQE on (shared-cluster's ``dynamic``)."""

    shape: Shape = field(default_factory=lambda: Shape(max_executors=4))

    def spark_conf(self, events: Path) -> dict[str, str]:
        return dynamic_conf(self.shape, events)


@dataclass(frozen=True)
class ProviderHistory:
    """The provider's connection with history on; cold regions (one application each)."""

    learn_from_history: bool = True
    history_min_runs: int = 3
    warm_pool: str = "off"
    shape: Shape = field(default_factory=Shape)

    def connection(self, host: str, base: Mapping[str, Any], events: Path, storage_root: str) -> str:
        """The connection's JSON: the cluster's own extras (``base``) with this policy's settings."""
        extra = dict(base)
        extra.update(
            {
                "learn_from_history": self.learn_from_history,
                "history_min_runs": self.history_min_runs,
                "warm_pool": self.warm_pool,
                "executor_cores": self.shape.executor_cores,
                "executor_memory": self.shape.executor_memory,
                "driver_memory": self.shape.driver_memory,
                "storage_root": storage_root,
                "capacity_poll_interval": 1,
                "trigger_min_wait": 30,
                "spark_conf": {
                    **dict(base.get("spark_conf") or {}),
                    "spark.pyspark.python": sys.executable,
                    **event_log_conf(events),
                },
            }
        )
        return json.dumps({"conn_type": "finegrained_spark", "host": host, "extra": extra})


@dataclass(frozen=True)
class Policies:
    """The three policies of one month."""

    hand: HandSized = field(default_factory=HandSized)
    dynamic: DynamicAllocation = field(default_factory=DynamicAllocation)
    provider: ProviderHistory = field(default_factory=ProviderHistory)

    def describe(self) -> dict[str, Any]:
        """Each policy's settings as the results record them."""
        from dataclasses import asdict

        return {name: asdict(getattr(self, name)) for name in POLICY_NAMES}


def day_order(names: tuple[PolicyName, ...], day: int) -> list[PolicyName]:
    """The order the policies run in on day ``day``: each takes every place in turn, so load drift favours none."""
    return in_turn(names, day)


def select(text: str) -> tuple[PolicyName, ...]:
    """The policies a comma-separated list names, in the canonical order; unknown names are an error."""
    wanted = [p for p in text.split(",") if p]
    unknown = sorted(set(wanted) - set(POLICY_NAMES))
    if unknown or not wanted:
        raise ValueError(f"unknown policies {unknown}; known: {', '.join(POLICY_NAMES)}")
    return tuple(p for p in POLICY_NAMES if p in wanted)
