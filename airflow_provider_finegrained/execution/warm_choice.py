"""Warm or cold for one region: the connection's warm_pool setting, the stages' own wishes, the fit.

The fit itself is pure (:func:`planning.warm_fit.decide_warm_fit`); here it meets the connection (the
pool's executor shape comes from the same settings the pool was started from) and the pool (started
on demand for ``auto``, checked for an ``sc://`` server). A pool that cannot be had leaves the region
to run cold, and the trace says why.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from airflow_provider_finegrained.planning.cluster_profile import SPARK_DEFAULT_MEMORY_FRACTION
from airflow_provider_finegrained.planning.sizing import RegionSizing
from airflow_provider_finegrained.planning.warm_fit import PoolShape, decide_warm_fit, static_settings

if TYPE_CHECKING:
    from airflow_provider_finegrained.settings import ConnectionSettings
    from airflow_provider_finegrained.warm import WarmPool


@dataclass(frozen=True)
class Carrier:
    """How a region reaches Spark: ``pool`` None means an application of its own (spark-submit)."""

    pool: WarmPool | None
    """The warm pool the region runs in, or None."""
    reason: str

    def trace(self) -> dict[str, Any]:
        if self.pool is None:
            return {"mode": "cold", "reason": self.reason}
        return {"mode": "warm", "reason": self.reason, "pool": self.pool.url}


def planning_shape(settings: ConnectionSettings) -> PoolShape | None:
    """The executors a pool started from ``settings`` runs (None for an existing ``sc://`` server)."""
    from airflow_provider_finegrained.warm import pool_shape

    if settings.warm_pool != "auto":
        return None
    shape = pool_shape(settings)
    fraction = float(settings.spark_conf.get("spark.memory.fraction", SPARK_DEFAULT_MEMORY_FRACTION))
    return PoolShape(
        executor_cores=shape.executor_cores,
        executor_memory=shape.executor_memory,
        max_executors=shape.max_executors,
        memory_fraction=fraction,
        gpus_per_executor=shape.gpus_per_executor,
        local=shape.local,
    )


def choose_carrier(settings: ConnectionSettings, sizing: RegionSizing, tasks: Mapping[str, Any]) -> Carrier:
    """Warm when the connection has a pool, no stage asks for cold, and every slot fits the pool."""
    if settings.warm_pool == "off":
        return Carrier(None, "warm_pool is 'off': an application of its own (spark-submit)")
    from airflow_provider_finegrained.warm import WarmPoolConfigError, WarmPoolUnavailable, pool_for

    cold = [name for name, task in tasks.items() if getattr(task, "warm", None) is False]
    static = {name: static_settings(getattr(task, "spark_conf", {}) or {}) for name, task in tasks.items()}
    try:
        fit = decide_warm_fit(sizing, planning_shape(settings), cold_stages=cold, static_conf=static)
    except WarmPoolConfigError as exc:
        return Carrier(None, f"the warm pool's settings are inconsistent ({exc}): an application of its own")
    if not fit.warm:
        return Carrier(None, f"{fit.reason}: an application of its own")
    try:
        pool = pool_for(settings)
    except (WarmPoolUnavailable, WarmPoolConfigError) as exc:
        return Carrier(None, f"the warm pool is unavailable ({exc}): an application of its own")
    return Carrier(pool, fit.reason)
