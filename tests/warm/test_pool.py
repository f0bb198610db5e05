"""The warm pool's lifecycle with real local Spark Connect servers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from airflow_provider_finegrained.warm import (
    WarmPool,
    WarmPoolUnavailable,
    check_health,
    check_pool,
    client_url,
    ensure_started,
    in_use,
    pool_for,
    status,
    stop,
)
from airflow_provider_finegrained.warm.auth import read_token
from airflow_provider_finegrained.warm.server import free_port
from airflow_provider_finegrained.warm.state import pool_processes
from tests.warm.conftest import alive, server_jvms, small_settings, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.spark]

START = """
import json, sys
from pathlib import Path
from tests.warm.conftest import small_settings
from airflow_provider_finegrained.warm import ensure_started, status
root, folder, idle = Path(sys.argv[1]), sys.argv[2], float(sys.argv[3])
pool = ensure_started(small_settings(root), folder, idle_timeout_s=idle)
print(json.dumps({"url": pool.url, "supervisor": status(folder)["supervisor_pid"]}))
"""


def test_a_started_pool_is_healthy_and_recorded(shared_pool: WarmPool) -> None:
    assert shared_pool.folder is not None and shared_pool.url.startswith("sc://localhost:")
    check_pool(shared_pool)
    info = status(shared_pool.folder)
    assert info is not None and info["alive"] and info["phase"] == "running"
    assert info["url"] == shared_pool.url
    assert len(server_jvms(shared_pool.folder)) == 1
    assert shared_pool.application_id is not None and shared_pool.application_id.startswith("local-")
    assert shared_pool.ui_url is not None and shared_pool.ui_url.startswith("http://127.0.0.1:")
    assert shared_pool.shape is not None and shared_pool.shape.local and shared_pool.shape.executor_cores == 1
    assert info["rss_bytes"] > 0


def test_ensure_started_again_returns_the_running_pool(shared_pool: WarmPool) -> None:
    assert shared_pool.folder is not None
    jvms = server_jvms(shared_pool.folder)
    again = ensure_started(small_settings(Path(shared_pool.folder).parent), shared_pool.folder, idle_timeout_s=0)
    assert again == shared_pool
    assert server_jvms(shared_pool.folder) == jvms


def test_a_lease_is_visible_while_held(shared_pool: WarmPool) -> None:
    assert shared_pool.folder is not None
    with in_use(shared_pool) as lease:
        assert lease.pool is shared_pool and lease.path is not None
        assert status(shared_pool.folder)["leases"] == 1  # type: ignore[index]
    assert status(shared_pool.folder)["leases"] == 0  # type: ignore[index]


def test_an_unreachable_server_gives_a_clear_error(tmp_path: Path) -> None:
    url = f"sc://127.0.0.1:{free_port()}"
    with pytest.raises(WarmPoolUnavailable, match=rf"server at {url} is unreachable: no gRPC channel"):
        pool_for(small_settings(tmp_path, warm_pool=url))
    assert pool_for(small_settings(tmp_path, warm_pool="off")) is None


def test_an_external_server_is_checked_and_never_leased(shared_pool: WarmPool, tmp_path: Path) -> None:
    assert shared_pool.token is not None
    # Its token given in the URL: taken out of the URL the pool shows, and used to connect.
    pool = pool_for(small_settings(tmp_path, warm_pool=client_url(shared_pool.url, shared_pool.token)))
    public = shared_pool.url  # sc://localhost:PORT, as client_url writes a loopback host with a token
    assert pool is not None and (pool.url, pool.folder, pool.shape) == (public, None, None)
    assert pool.token == shared_pool.token and shared_pool.token not in repr(pool)
    with in_use(pool) as lease:
        assert lease.path is None
    # Without it, the pool refuses it.
    with pytest.raises(WarmPoolUnavailable, match="UNAUTHENTICATED"):
        pool_for(small_settings(tmp_path, warm_pool=shared_pool.url))


def test_two_processes_start_one_pool_that_stops_when_idle_and_unleased(tmp_path: Path) -> None:
    folder = str(tmp_path / "pool")
    starters = [
        subprocess.Popen(
            [sys.executable, "-c", START, str(tmp_path), folder, "6"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=os.environ.copy(),
        )
        for _ in range(2)
    ]
    answers = []
    for starter in starters:
        out, err = starter.communicate(timeout=400)
        assert starter.returncode == 0, err[-3000:]
        answers.append(json.loads(out.strip().splitlines()[-1]))
    assert answers[0] == answers[1]
    assert len(server_jvms(folder)) == 1
    # Both starters have exited; the pool outlives them. A lease keeps it past its idle timeout.
    settings = small_settings(tmp_path)
    pool = ensure_started(settings, folder, idle_timeout_s=6)
    assert pool.url == answers[0]["url"]
    with in_use(pool):
        time.sleep(12)
        assert status(folder)["alive"]  # type: ignore[index]
        check_pool(pool)
    wait_until(lambda: status(folder) is None, 90, "the idle pool to stop")
    assert pool_processes(folder) == [] and not alive(answers[0]["supervisor"])
    with pytest.raises(WarmPoolUnavailable, match="no longer running"), in_use(pool):
        pass


def test_sigkill_of_the_supervisor_takes_the_server_with_it_and_the_next_start_cleans_up(tmp_path: Path) -> None:
    folder = str(tmp_path / "pool")
    settings = small_settings(tmp_path)
    first = ensure_started(settings, folder, idle_timeout_s=0)
    info = status(folder)
    assert info is not None
    supervisor, server = info["supervisor_pid"], info["server_pid"]
    os.kill(supervisor, signal.SIGKILL)
    wait_until(lambda: not alive(server), 30, "the server JVM to die with its supervisor")
    assert server_jvms(folder) == []
    stale = status(folder)
    assert stale is not None and stale["phase"] == "stale" and not stale["alive"]
    with pytest.raises(WarmPoolUnavailable, match="no longer running"), in_use(first):
        pass
    second = ensure_started(settings, folder, idle_timeout_s=0)
    assert status(folder)["supervisor_pid"] != supervisor  # type: ignore[index]
    check_pool(second)
    assert stop(folder) is True
    assert pool_processes(folder) == [] and status(folder) is None
    assert stop(folder) is False


def test_cli_start_status_stop(tmp_path: Path) -> None:
    folder = str(tmp_path / "pool")
    conn = {"conn_type": "finegrained_spark", "host": "local[1]", "extra": {"driver_memory": "1g"}}
    env = {**os.environ, "AIRFLOW_CONN_FG_WARM_CLI": json.dumps(conn)}

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "airflow_provider_finegrained", "warm", *args, "--dir", folder]
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=400, check=False)

    started = cli("start", "--conn-id", "fg_warm_cli", "--idle-timeout", "0")
    assert started.returncode == 0, started.stderr[-3000:]
    url = started.stdout.strip().splitlines()[-1]
    assert url.startswith("sc://localhost:")  # the host pyspark sends a token to in plaintext
    check_health(url, token=read_token(folder))
    shown = cli("status", "--json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["url"] == url and json.loads(shown.stdout)["master"] == "local[1]"
    stopped = cli("stop")
    assert stopped.returncode == 0 and "stopped the warm pool" in stopped.stdout
    assert pool_processes(folder) == []
    gone = cli("status")
    assert gone.returncode == 1 and "not running" in gone.stderr
