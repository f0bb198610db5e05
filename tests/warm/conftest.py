"""A small local warm pool (1 core, 1g driver), shared by the tests that do not need their own."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest

from airflow_provider_finegrained.settings import ConnectionSettings
from airflow_provider_finegrained.warm import WarmPool, ensure_started, stop
from airflow_provider_finegrained.warm.server import FOLDER_CONF, SERVER_CLASS

SMALL = {"total_cores": 1, "driver_memory": "1g"}
SECRET_CONF = {"spark.hadoop.fs.s3a.secret.key": "hush-not-on-argv-4711"}
"""A secret Spark setting the shared pool's server gets: it must reach it through its properties file."""


def small_settings(storage: Path, **extra: object) -> ConnectionSettings:
    return ConnectionSettings.embedded_default(
        airflow_home=str(storage), defaults={**SMALL, "storage_root": str(storage / "storage"), **extra}
    )


def server_jvms(folder: str) -> list[int]:
    """Live Spark Connect server JVMs started for `folder`, found by their command line."""
    marker = f"{FOLDER_CONF}={folder}"
    pids = []
    for proc in psutil.process_iter():
        try:
            cmdline = proc.cmdline()
            if SERVER_CLASS in cmdline and marker in cmdline and proc.status() != psutil.STATUS_ZOMBIE:
                pids.append(proc.pid)
        except psutil.Error:
            pass
    return pids


def alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def shared_pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WarmPool]:
    root = tmp_path_factory.mktemp("warm-shared")
    folder = str(root / "pool")
    pool = ensure_started(small_settings(root, spark_conf=SECRET_CONF), folder, idle_timeout_s=0)
    try:
        yield pool
    finally:
        stop(folder)
        assert server_jvms(folder) == []
