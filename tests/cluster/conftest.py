"""A real Spark standalone cluster on 127.0.0.1 (2 workers x 2 cores x 4g), shared by the tests of this folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from airflow_provider_finegrained.spark.standalone import StandaloneCluster, start_local_cluster


def assert_all_gone(pids: list[int]) -> None:
    """Every pid has exited (a zombie waiting for init to reap it has exited too)."""
    alive = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    assert alive == [], f"processes still running: {alive}"


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    work_dir: Path = tmp_path_factory.mktemp("standalone")
    cluster = start_local_cluster(str(work_dir), workers=2, cores_per_worker=2, memory_per_worker="4g")
    try:
        yield cluster
    finally:
        # Whatever the tests left running (drivers, executors) is part of the cluster and goes with it.
        pids = [p.pid for p in cluster.processes()]
        cluster.stop()
        assert cluster.processes() == []
        assert_all_gone(pids)


def sleeping_app(tmp_path: Path) -> str:
    """A PySpark application that holds its executors until it is killed."""
    app = tmp_path / "sleeper.py"
    app.write_text(
        "import time\n"
        "from pyspark.sql import SparkSession\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "assert spark.sparkContext.parallelize(range(4), 2).count() == 4\n"
        "print('STARTED', spark.sparkContext.applicationId, flush=True)\n"
        "while True:\n"
        "    time.sleep(1)\n"
    )
    return str(app)
