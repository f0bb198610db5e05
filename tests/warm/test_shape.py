"""The pool's shape and server command from a connection's settings (no Spark started)."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_finegrained.settings import ConnectionSettings
from airflow_provider_finegrained.warm import WarmPoolConfigError, WarmPoolUnavailable, auto_folder, pool_shape
from airflow_provider_finegrained.warm.health import grpc_target
from airflow_provider_finegrained.warm.server import SERVER_CLASS, server_command, server_env

GiB = 2**30


def standalone(tmp_path: Path, **extra: object) -> ConnectionSettings:
    fields = {"total_cores": 8, "executor_cores": 2, "executor_memory": "1g", "storage_root": str(tmp_path), **extra}
    return ConnectionSettings.from_connection_fields("spark://127.0.0.1:7077", fields, airflow_home=str(tmp_path))


def test_local_pool_is_one_jvm_of_the_connection_cores_and_driver_memory(tmp_path: Path) -> None:
    settings = ConnectionSettings.embedded_default(
        airflow_home=str(tmp_path), defaults={"total_cores": 1, "driver_memory": "1g"}
    )
    shape = pool_shape(settings)
    assert (shape.local, shape.executor_cores, shape.executor_memory) == (True, 1, GiB)
    assert (shape.min_executors, shape.max_executors) == (1, 1)
    command = server_command(settings, shape, 4242, 4343, "/f")
    assert command[command.index("--master") + 1] == "local[1]"
    assert command[command.index("--class") + 1] == SERVER_CLASS
    assert command[command.index("--name") + 1] == "finegrained-warm-pool"
    assert command[command.index("--driver-memory") + 1] == "1024m"
    assert "spark.connect.grpc.binding.port=4242" in command
    assert "spark.connect.grpc.binding.address=127.0.0.1" in command
    assert not any("dynamicAllocation" in arg for arg in command)
    assert server_env(settings, {})["SPARK_LOCAL_IP"] == "127.0.0.1"


def test_standalone_pool_scales_between_the_minimum_and_maximum_resources(tmp_path: Path) -> None:
    settings = standalone(tmp_path, min_slots=2, max_slots=6)
    shape = pool_shape(settings)
    assert (shape.local, shape.executor_cores, shape.min_executors, shape.max_executors) == (False, 2, 1, 3)
    command = server_command(settings, shape, 1, 2, "/f")
    for conf in (
        "spark.dynamicAllocation.enabled=true",
        "spark.dynamicAllocation.shuffleTracking.enabled=true",
        "spark.dynamicAllocation.minExecutors=1",
        "spark.dynamicAllocation.initialExecutors=1",
        "spark.dynamicAllocation.maxExecutors=3",
        "spark.cores.max=6",
        "spark.executor.cores=2",
        "spark.executor.memory=1024m",
        # An idle pool gives executors back to the shared cluster, those holding shuffle files too.
        "spark.dynamicAllocation.executorIdleTimeout=30s",
        "spark.dynamicAllocation.shuffleTracking.timeout=30s",
    ):
        assert conf in command


def test_a_pools_own_idle_timeouts_win(tmp_path: Path) -> None:
    conf = {
        "spark.dynamicAllocation.executorIdleTimeout": "5s",
        "spark.dynamicAllocation.shuffleTracking.timeout": "7s",
    }
    settings = standalone(tmp_path, min_slots=2, max_slots=6, spark_conf=conf)
    command = server_command(settings, pool_shape(settings), 1, 2, "/f")
    assert "spark.dynamicAllocation.executorIdleTimeout=5s" in command
    assert "spark.dynamicAllocation.shuffleTracking.timeout=7s" in command
    assert "spark.dynamicAllocation.executorIdleTimeout=30s" not in command
    # Without a maximum, total_cores bounds the pool.
    assert pool_shape(standalone(tmp_path)).max_executors == 4


def test_minimum_above_what_the_maximum_allows_is_refused_naming_the_settings(tmp_path: Path) -> None:
    # min_slots 5 needs 3 executors of 2 cores; total_cores 5 holds only 2 whole ones. (The connection's
    # own checks pass: 5 slots is within total_cores, and no maximum is set.)
    with pytest.raises(WarmPoolConfigError, match=r"min_slots.*3 executor.*total_cores \(5\).*at most 2"):
        pool_shape(standalone(tmp_path, total_cores=5, min_slots=5))


def test_auto_folder_is_per_host_and_master_under_the_storage_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket

    monkeypatch.setattr(socket, "gethostname", lambda: "worker-1.example")
    assert auto_folder(standalone(tmp_path)) == str(tmp_path / "_warm" / "worker-1.example" / "spark___127.0.0.1_7077")


def test_hosts_sharing_a_mounted_root_never_share_a_pool_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two Airflow worker hosts that mount one storage root (NFS): each pool listens on its own host's loopback,
    # so a host that found the other's pid and port would reach nothing, or a process of its own on that port.
    import socket

    folders = set()
    for host in ("worker-1", "worker-2"):
        monkeypatch.setattr(socket, "gethostname", lambda host=host: host)
        folders.add(auto_folder(standalone(tmp_path)))
    assert len(folders) == 2


def test_a_url_that_is_not_spark_connect_is_refused() -> None:
    assert grpc_target("sc://example:15003/;user_id=x") == "example:15003"
    assert grpc_target("sc://example") == "example:15002"
    with pytest.raises(WarmPoolUnavailable, match="not a Spark Connect URL"):
        grpc_target("http://example:15002")


def test_pool_folders_finds_per_host_folders_and_those_of_an_earlier_layout(tmp_path: Path) -> None:
    from airflow_provider_finegrained.warm.folders import pool_folders

    (tmp_path / "_warm" / "worker-1" / "local_2_").mkdir(parents=True)  # <host>/<master>
    (tmp_path / "_warm" / "spark___m_7077").mkdir()  # <master>, before per-host folders
    (tmp_path / "_warm" / "note.txt").write_text("not a folder")
    assert pool_folders(tmp_path / "_warm") == [
        str(tmp_path / "_warm" / "spark___m_7077"),
        str(tmp_path / "_warm" / "worker-1"),
        str(tmp_path / "_warm" / "worker-1" / "local_2_"),
    ]
    assert pool_folders(tmp_path / "missing") == []
