"""A warm pool on a real standalone cluster: its executors scale between the minimum and the maximum."""

from __future__ import annotations

import json
import sys
import threading
import urllib.request
from pathlib import Path

import pytest

from airflow_provider_finegrained.settings import ConnectionSettings
from airflow_provider_finegrained.spark.standalone import StandaloneCluster
from airflow_provider_finegrained.warm import WarmPool, client_url, ensure_started, stop
from airflow_provider_finegrained.warm.state import pool_processes
from tests.warm.conftest import wait_until

pytestmark = pytest.mark.slow


def executors(pool: WarmPool) -> int:
    """Live executors of the pool's application, from its own REST API (the driver is not one)."""
    url = f"{pool.ui_url}/api/v1/applications/{pool.application_id}/executors"
    with urllib.request.urlopen(url, timeout=10) as answer:
        return sum(1 for e in json.load(answer) if e["id"] != "driver" and e["isActive"])


def test_pool_executors_scale_between_min_and_max(standalone_cluster: StandaloneCluster, tmp_path: Path) -> None:
    # The session's cluster (tests/conftest.py: 2 workers x 2 cores, more than the pool may take), not one of
    # this module's own: the pool's own shape bounds its executors.
    cluster = standalone_cluster
    extras = {
        "total_cores": 2,
        "executor_cores": 1,
        "executor_memory": "600m",
        "driver_memory": "1g",
        "min_slots": 1,
        "max_slots": 2,
        "master_webui_url": cluster.webui_url,
        "storage_root": str(tmp_path / "storage"),
        "spark_conf": {
            "spark.pyspark.python": sys.executable,
            "spark.dynamicAllocation.executorIdleTimeout": "3s",
            "spark.dynamicAllocation.shuffleTracking.timeout": "3s",
            "spark.dynamicAllocation.schedulerBacklogTimeout": "1s",
        },
    }
    settings = ConnectionSettings.from_connection_fields(cluster.master_url, extras, airflow_home=str(tmp_path))
    folder = str(tmp_path / "pool")
    pool = ensure_started(settings, folder, idle_timeout_s=0)
    try:
        assert pool.shape is not None and (pool.shape.min_executors, pool.shape.max_executors) == (1, 2)
        assert pool.application_id is not None and pool.application_id.startswith("app-")
        apps = [a for a in cluster.status()["activeapps"] if a["id"] == pool.application_id]
        assert apps and apps[0]["name"] == "finegrained-warm-pool"
        wait_until(lambda: executors(pool) == 1, 120, "the minimum of one executor")

        from pyspark.sql import SparkSession

        spark = SparkSession.builder.remote(client_url(pool.url, pool.token)).create()
        seen: list[int] = []
        # Two tasks that each sleep 20 s: the backlog asks for a second executor, never a third.
        job = threading.Thread(
            target=lambda: (
                spark.range(0, 2, 1, 2)
                .selectExpr("reflect('java.lang.Thread', 'sleep', cast(20000 as bigint)) AS slept")
                .collect()
            )
        )
        job.start()
        try:
            wait_until(lambda: seen.append(executors(pool)) is None and seen[-1] == 2, 120, "the pool to scale to 2")
        finally:
            job.join(timeout=180)
            spark.stop()
        wait_until(lambda: seen.append(executors(pool)) is None and seen[-1] == 1, 120, "the pool to shrink to 1")
        assert max(seen) == 2 and min(seen) >= 1
    finally:
        assert stop(folder)
        assert pool_processes(folder) == []
