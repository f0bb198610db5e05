"""The warm pool: a long-lived Spark Connect server to which regions are submitted without a JVM start.

See docs/warm.md. ``pool_for(settings)`` is the entry point for a region; ``ensure_started``,
``stop`` and ``status`` manage a pool's folder; ``in_use`` leases a pool while a region runs in it.
Every pool the provider starts is locked with a token (``WarmPool.token``; ``client_url`` builds the
URL a client connects with).
"""

from airflow_provider_finegrained.warm.auth import client_url
from airflow_provider_finegrained.warm.control import WarmPoolStopError, status, stop
from airflow_provider_finegrained.warm.folders import auto_folder, pool_folders
from airflow_provider_finegrained.warm.health import check_health, check_pool
from airflow_provider_finegrained.warm.pool import in_use, pool_for
from airflow_provider_finegrained.warm.server import PoolShape, WarmPoolConfigError, pool_shape
from airflow_provider_finegrained.warm.start import ensure_started
from airflow_provider_finegrained.warm.state import Lease, WarmPool, WarmPoolUnavailable

__all__ = [
    "Lease",
    "PoolShape",
    "WarmPool",
    "WarmPoolConfigError",
    "WarmPoolStopError",
    "WarmPoolUnavailable",
    "auto_folder",
    "check_health",
    "check_pool",
    "client_url",
    "ensure_started",
    "in_use",
    "pool_folders",
    "pool_for",
    "pool_shape",
    "status",
    "stop",
]
