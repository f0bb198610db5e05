"""Helpers for the tests on a real Spark standalone cluster (the session's ``standalone_cluster``, 2 workers x 2 cores
x 4g on 127.0.0.1, is in tests/conftest.py: tests/warm shares it)."""

from __future__ import annotations

from pathlib import Path

import psutil


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
