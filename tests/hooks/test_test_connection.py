"""FineGrainedSparkHook.test_connection against real servers: a standalone master, loopback HTTP and TCP servers.

The master's /json/ and the ResourceManager's answers are the captured samples of tests/capacity, served by a
real HTTP server; one test starts a real standalone master and worker.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook
from tests.capacity.test_sources import RecordingServer, closed_port_url, sample, serve_rm

MASTER = "spark://127.0.0.1:7077"


def set_connection(monkeypatch: pytest.MonkeyPatch, conn_id: str, host: str, **extra: Any) -> None:
    conn = {"conn_type": "finegrained_spark", "host": host, "extra": extra}
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))


def test_connection(monkeypatch: pytest.MonkeyPatch, host: str, **extra: Any) -> tuple[bool, str]:
    set_connection(monkeypatch, "fg_test", host, **extra)
    return FineGrainedSparkHook("fg_test").test_connection()


test_connection.__test__ = False  # type: ignore[attr-defined]  # a helper, not a test


@pytest.fixture(autouse=True)
def _no_finegrained_config(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    for name in list(os.environ):
        if name.startswith("AIRFLOW__FINEGRAINED__"):
            monkeypatch.delenv(name)


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    running = RecordingServer()
    yield running
    running.close()


@pytest.fixture
def listening_port() -> Iterator[int]:
    """A loopback TCP port that accepts connections (and drops them)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
                conn.close()
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield sock.getsockname()[1]
    stop.set()
    thread.join(5)
    sock.close()


def closed_port() -> int:
    return int(closed_port_url().split(":")[2].split("/")[0])


def test_local_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    ok, message = test_connection(monkeypatch, "local[2]", driver_memory="1g")
    assert ok, message
    parts = message.split("; ")
    assert parts[0] == (
        "settings: consistent: master local[2] (client mode), up to 2 core(s) and 1.0 GiB per application in "
        "local threads of 2 core(s), 1.0 GiB"
    )
    assert parts[1] == "a region runs with at least 1 slot(s)"
    assert parts[2].startswith("java: Java ")
    assert parts[3] == "master: local[2] runs on this machine (2 core(s))"
    assert parts[4].startswith("storage: storage_root ") and "wrote, read back and deleted" in parts[4]


def test_storage_is_probed_for_real(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = tmp_path / "fresh" / "storage"
    ok, message = test_connection(monkeypatch, "local[1]", storage_root=str(root))
    assert ok, message
    assert f"storage: storage_root {root}: wrote, read back and deleted a " in message
    assert root.is_dir() and not any(root.iterdir())  # created as a run would, nothing left behind
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    ok, message = test_connection(monkeypatch, "local[1]", storage_root=str(blocker / "storage"))
    assert not ok and f"storage FAILED: storage_root '{blocker / 'storage'}': could not " in message


def test_storage_on_s3_with_the_storage_connection(monkeypatch: pytest.MonkeyPatch, moto_endpoint: str) -> None:
    import s3fs

    secret = "probe-secret-key-0d3e"
    lake = {
        "conn_type": "aws",
        "login": "AKIDPROBE",
        "password": secret,
        "extra": {"endpoint_url": moto_endpoint, "region_name": "eu-west-1"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_LAKE_PROBE", json.dumps(lake))
    s3fs.S3FileSystem(key="AKIDPROBE", secret=secret, client_kwargs=lake["extra"]).mkdir("probe-bucket")
    ok, message = test_connection(
        monkeypatch, "local[1]", storage_root="s3://probe-bucket/fg", storage_conn_id="lake_probe"
    )
    assert ok, message
    assert "storage: storage_root s3://probe-bucket/fg: wrote, read back and deleted" in message
    ok, message = test_connection(
        monkeypatch, "local[1]", storage_root="s3://no-such-bucket/fg", storage_conn_id="lake_probe"
    )
    assert not ok and "storage FAILED: storage_root 's3://no-such-bucket/fg': could not" in message
    ok, message = test_connection(
        monkeypatch, "local[1]", storage_root="s3://probe-bucket/fg", storage_conn_id="undefined_lake"
    )
    assert not ok and "storage FAILED: storage_conn_id: connection 'undefined_lake'" in message
    assert secret not in message


def test_bad_settings_and_missing_connection(monkeypatch: pytest.MonkeyPatch) -> None:
    ok, message = test_connection(monkeypatch, "mesos://x:5050")
    assert not ok and "connection 'fg_test': master: 'mesos://x:5050' is not a Spark master URL" in message
    ok, message = FineGrainedSparkHook("nowhere").test_connection()
    assert not ok and "'nowhere' is not defined" in message


def test_standalone_master_reachable_and_executor_fits(
    monkeypatch: pytest.MonkeyPatch, server: RecordingServer
) -> None:
    server.serve("/json/", sample("standalone_idle.json"))  # workers of 1 core/1 GiB and 2 cores/2 GiB
    extra = {"total_cores": 3, "executor_cores": 1, "executor_memory": "1g", "master_webui_url": server.url}
    ok, message = test_connection(monkeypatch, MASTER, **extra)
    assert ok, message
    assert (
        f"master: standalone master {MASTER} reachable, 2 alive worker(s), 3 of 3 core(s) and 3.0 GiB of 3.0 GiB "
        f"free (standalone master {server.url}/json/)" in message
    )
    assert "executor: one executor of 1 core(s), 1.0 GiB fits 2 of 2 worker(s) (2 with room now)" in message


def test_standalone_executor_fits_no_worker(monkeypatch: pytest.MonkeyPatch, server: RecordingServer) -> None:
    server.serve("/json/", sample("standalone_idle.json"))
    extra = {"total_cores": 4, "executor_cores": 2, "executor_memory": "3g", "master_webui_url": server.url}
    ok, message = test_connection(monkeypatch, MASTER, **extra)
    assert not ok
    assert (
        "executor FAILED: no worker can hold one executor of 2 core(s), 3.0 GiB (executor_cores, executor_memory; "
        "the largest has 2 core(s), 2.0 GiB): applications would wait forever"
    ) in message
    assert "master: standalone master" in message  # the master itself was fine


def test_standalone_minimum_resources_above_the_cluster(
    monkeypatch: pytest.MonkeyPatch, server: RecordingServer
) -> None:
    server.serve("/json/", sample("standalone_idle.json"))
    extra = {
        "total_cores": 4,
        "executor_cores": 1,
        "executor_memory": "512m",
        "min_slots": 4,
        "max_slots": 4,
        "master_webui_url": server.url,
    }
    ok, message = test_connection(monkeypatch, MASTER, **extra)
    assert not ok
    assert "min/max resources hold with 4 to 4 executor(s)" in message
    assert "need 4 executor(s) and the whole cluster holds 3" in message


def test_standalone_without_workers_standby_and_down(monkeypatch: pytest.MonkeyPatch, server: RecordingServer) -> None:
    idle = sample("standalone_idle.json")
    server.serve("/json/", {**idle, "workers": []})
    ok, message = test_connection(monkeypatch, MASTER, total_cores=2, master_webui_url=server.url)
    assert not ok and "0 alive worker(s)" in message and "start a worker" in message
    server.serve("/json/", {**idle, "status": "STANDBY"})
    ok, message = test_connection(monkeypatch, MASTER, total_cores=2, master_webui_url=server.url)
    assert not ok and "master status is 'STANDBY'" in message
    down = closed_port_url().removesuffix("/json/")
    ok, message = test_connection(monkeypatch, MASTER, total_cores=2, master_webui_url=down)
    assert not ok
    assert (
        f"master FAILED: standalone master {MASTER} (the master's web UI at {down}) is not reachable: "
        "no standalone master answered"
    ) in message
    assert f"{down}/json/" in message


def test_yarn_resourcemanager(monkeypatch: pytest.MonkeyPatch, server: RecordingServer, tmp_path: Path) -> None:
    serve_rm(server)
    # A local root (a shared mount, say): test_connection probes the storage for real, and no HDFS runs here.
    extra = {"total_cores": 16, "executor_cores": 4, "executor_memory": "8g", "storage_root": str(tmp_path)}
    ok, message = test_connection(monkeypatch, "yarn", yarn_resourcemanager_url=server.url, **extra)
    assert ok, message
    assert "master: YARN ResourceManager reachable, 2 alive worker(s), 14 of 16 core(s)" in message
    # YARN containers hold the overhead: 8 GiB + 819 MiB fits the 16 GiB node, not the 8 GiB one.
    assert (
        "executor: one executor of 4 core(s), 8.8 GiB with overhead fits 1 of 2 worker(s) (1 with room now)" in message
    )
    ok, message = test_connection(monkeypatch, "yarn", yarn_resourcemanager_url=closed_port_url(), **extra)
    assert not ok and "master FAILED: YARN ResourceManager is not reachable" in message


def test_yarn_without_resourcemanager_is_not_contacted(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    ok, message = test_connection(monkeypatch, "yarn", total_cores=16, storage_root=str(tmp_path))
    assert ok and "yarn is reached by spark-submit at run time" in message


def test_an_unreachable_storage_root_fails_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    ok, message = test_connection(monkeypatch, "yarn", total_cores=16, storage_root="hdfs:///fg")
    assert not ok and "master: yarn is reached by spark-submit at run time" in message
    storage = next(part for part in message.split("; ") if part.startswith("storage"))
    assert storage.startswith("storage FAILED: storage_root 'hdfs:///fg': could not ")
    assert "\n" not in storage


def test_history_server(monkeypatch: pytest.MonkeyPatch, server: RecordingServer) -> None:
    server.serve("/api/v1/applications?limit=1", [])
    history = server.url.replace("http://", "http://viewer:pa55word@")
    ok, message = test_connection(monkeypatch, "local[1]", history_server_url=history)
    assert ok, message
    assert message.endswith(f"history server: {server.url} reachable (no applications yet)")
    assert "pa55word" not in message
    assert server.requests[-1][1] == "/api/v1/applications?limit=1"
    down = closed_port_url().removesuffix("/json/")
    ok, message = test_connection(monkeypatch, "local[1]", history_server_url=down)
    assert not ok and message.endswith(
        f"history server FAILED: {down} is not reachable: [Errno 111] Connection refused"
    )


def test_history_server_gets_the_credentials_as_basic_auth(
    monkeypatch: pytest.MonkeyPatch, server: RecordingServer
) -> None:
    server.serve("/api/v1/applications?limit=1", [{"id": "app-1"}])
    url = server.url.replace("http://", "http://viewer:pa55word@")
    ok, message = test_connection(monkeypatch, "local[1]", history_server_url=url)
    assert ok and "(applications listed)" in message and "pa55word" not in message
    assert [h.get("Authorization") for h in server.headers] == [
        "Basic " + base64.b64encode(b"viewer:pa55word").decode()
    ]


def test_warm_pool_and_kubernetes_are_a_tcp_connect(monkeypatch: pytest.MonkeyPatch, listening_port: int) -> None:
    pool = f"sc://127.0.0.1:{listening_port}/;token=s3cr3t-token"
    ok, message = test_connection(monkeypatch, "local[1]", warm_pool=pool)
    assert ok, message
    assert message.endswith(f"warm pool: Spark Connect server sc://127.0.0.1:{listening_port} accepts connections")
    assert "s3cr3t-token" not in message
    closed = closed_port()
    ok, message = test_connection(monkeypatch, "local[1]", warm_pool=f"sc://127.0.0.1:{closed}/;token=s3cr3t-token")
    assert not ok and f"warm pool FAILED: Spark Connect server sc://127.0.0.1:{closed} is not reachable" in message
    assert "s3cr3t-token" not in message
    # An external pool named by an Airflow connection: its host and port are checked, its token never shown.
    conn = {"conn_type": "generic", "host": "127.0.0.1", "port": listening_port, "password": "s3cr3t-token"}
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_CONNECT_POOL", json.dumps(conn))
    ok, message = test_connection(monkeypatch, "local[1]", warm_pool="conn:spark_connect_pool")
    assert ok and message.endswith(f"Spark Connect server sc://127.0.0.1:{listening_port} accepts connections")
    assert "s3cr3t-token" not in message
    ok, message = test_connection(monkeypatch, "local[1]", warm_pool="conn:no_such_connection")
    assert not ok and "warm pool FAILED: warm_pool: connection 'no_such_connection' cannot be read" in message
    ok, message = test_connection(monkeypatch, f"k8s://https://127.0.0.1:{listening_port}", total_cores=4)
    assert ok and f"master: Kubernetes API server 127.0.0.1:{listening_port} accepts connections" in message


@pytest.mark.security
def test_secrets_never_reach_the_message(monkeypatch: pytest.MonkeyPatch, server: RecordingServer) -> None:
    server.serve("/json/", sample("standalone_idle.json"))
    extra = {
        "total_cores": 2,
        "executor_cores": 1,
        "executor_memory": "512m",
        "master_webui_url": server.url.replace("http://", "http://admin:hunter22@"),
        "spark_conf": {"spark.hadoop.fs.s3a.secret.key": "AKIAVERYSECRET"},
    }
    _, message = test_connection(monkeypatch, MASTER, **extra)
    assert "http://admin:***@127.0.0.1:" in message  # named, with its password hidden
    assert "hunter22" not in message and "AKIAVERYSECRET" not in message


@pytest.mark.slow
@pytest.mark.cluster
def test_a_real_standalone_master(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from airflow_provider_finegrained.spark.standalone_start import start_local_cluster

    cluster = start_local_cluster(str(tmp_path / "cluster"), workers=1, cores_per_worker=1, memory_per_worker="1g")
    try:
        extra = {
            "total_cores": 1,
            "executor_cores": 1,
            "executor_memory": "512m",
            "master_webui_url": cluster.webui_url,
        }
        ok, message = test_connection(monkeypatch, cluster.master_url, **extra)
        assert ok, message
        assert (
            f"master: standalone master {cluster.master_url} reachable, 1 alive worker(s), 1 of 1 core(s) and "
            f"1.0 GiB of 1.0 GiB free" in message
        )
        assert "executor: one executor of 1 core(s), 512.0 MiB fits 1 of 1 worker(s) (1 with room now)" in message
        ok, message = test_connection(
            monkeypatch, cluster.master_url, **{**extra, "executor_memory": "2g", "total_cores": 4}
        )
        assert not ok and "no worker can hold one executor of 1 core(s), 2.0 GiB" in message
    finally:
        cluster.stop()
    ok, message = test_connection(monkeypatch, cluster.master_url, **extra)
    assert not ok and "is not reachable" in message
