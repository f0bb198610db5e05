"""The warm pool: a long-lived Spark Connect server to which regions are submitted without a JVM start.

See docs/warm.md. ``pool_for(settings)`` is the entry point for a region; ``ensure_started``,
``stop`` and ``status`` manage a pool's folder; ``in_use`` leases a pool while a region runs in it.
"""

from airflow_provider_finegrained.warm.health import check_health
from airflow_provider_finegrained.warm.pool import (
    WarmPoolStopError,
    auto_folder,
    ensure_started,
    in_use,
    pool_for,
    status,
    stop,
)
from airflow_provider_finegrained.warm.server import PoolShape, WarmPoolConfigError, pool_shape
from airflow_provider_finegrained.warm.state import WarmPool, WarmPoolUnavailable

__all__ = [
    "PoolShape",
    "WarmPool",
    "WarmPoolConfigError",
    "WarmPoolStopError",
    "WarmPoolUnavailable",
    "auto_folder",
    "check_health",
    "ensure_started",
    "in_use",
    "pool_for",
    "pool_shape",
    "status",
    "stop",
]
