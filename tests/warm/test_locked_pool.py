"""A pool the provider starts is locked with its own token, nothing secret is on its command lines, and
a region killed with SIGKILL has its Spark jobs stopped by the pool within seconds.

One real local Spark Connect server (the module's shared pool, started with a secret Spark setting).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_finegrained.launchers.http import get_json
from airflow_provider_finegrained.spark.submit import connect_client_env_restored
from airflow_provider_finegrained.warm import WarmPool, WarmPoolUnavailable, check_health, client_url, status
from airflow_provider_finegrained.warm.auth import TOKEN_ENV
from airflow_provider_finegrained.warm.state import STATE_FILE
from tests.warm.conftest import SECRET_CONF, wait_until

pytestmark = pytest.mark.slow


def count(url: str) -> int:
    from pyspark.sql import SparkSession

    with connect_client_env_restored(unset=(TOKEN_ENV,)):
        spark: Any = SparkSession.builder.remote(url).create()
        try:
            return int(spark.range(3).count())
        finally:
            spark.stop()


@pytest.mark.security
def test_a_client_without_the_token_or_with_a_wrong_one_is_refused(shared_pool: WarmPool) -> None:
    from pyspark.errors.exceptions.connect import SparkConnectGrpcException

    assert shared_pool.token
    with pytest.raises(SparkConnectGrpcException, match="No authentication token provided"):
        count(shared_pool.url)
    with pytest.raises(SparkConnectGrpcException, match="Invalid authentication token"):
        count(client_url(shared_pool.url, "not-the-token"))
    assert count(client_url(shared_pool.url, shared_pool.token)) == 3


@pytest.mark.security
def test_the_health_check_needs_the_token_and_never_shows_it(shared_pool: WarmPool) -> None:
    assert shared_pool.token
    with pytest.raises(WarmPoolUnavailable, match="UNAUTHENTICATED") as refused:
        check_health(shared_pool.url)
    assert shared_pool.url in str(refused.value)
    check_health(shared_pool.url, token=shared_pool.token)
    with pytest.raises(WarmPoolUnavailable, match="Invalid authentication token") as wrong:
        check_health(shared_pool.url, token=shared_pool.token[::-1])
    assert shared_pool.token[::-1] not in str(wrong.value)


def cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.mark.security
def test_the_token_and_secret_settings_are_on_no_command_line_and_in_no_shared_file(shared_pool: WarmPool) -> None:
    assert shared_pool.folder is not None and shared_pool.token
    info = status(shared_pool.folder)
    assert info is not None
    ((secret_key, secret_value),) = SECRET_CONF.items()
    server, supervisor = cmdline(info["server_pid"]), cmdline(info["supervisor_pid"])
    assert "SparkConnectServer" in server and "--properties-file" in server
    for line in (server, supervisor):
        assert shared_pool.token not in line and secret_value not in line and secret_key not in line
    # The properties file lived only while the server started.
    properties = server.split("--properties-file ", 1)[1].split(" ", 1)[0]
    assert not os.path.exists(properties) and not os.path.exists(os.path.dirname(properties))
    # The token is in the owner-only token file, and nowhere else in the pool's folder.
    token_file = Path(shared_pool.folder) / "token"
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    for name in os.listdir(shared_pool.folder):
        path = Path(shared_pool.folder) / name
        if path.is_file() and path != token_file:
            assert shared_pool.token not in path.read_text(errors="replace"), name
    assert "token" not in json.loads((Path(shared_pool.folder) / STATE_FILE).read_text())
    # The secret setting did reach the server (Spark shows it redacted).
    assert shared_pool.ui_url and shared_pool.application_id
    environment = get_json(f"{shared_pool.ui_url}/api/v1/applications/{shared_pool.application_id}/environment")
    properties_seen = dict(environment["sparkProperties"])
    assert secret_key in properties_seen and secret_value not in properties_seen[secret_key]


# A warm region's stage as the warm launcher runs it: a lease on the pool, the stage's Connect session
# recorded on it, then a job whose tasks sleep (a Python UDF, 60 s a row). Argument 2: "record" or not.
REGION = """
import sys
from airflow_provider_finegrained.runtime.connect_region import ConnectSessions
from airflow_provider_finegrained.runtime.job import StageJob
from airflow_provider_finegrained.warm import in_use
from airflow_provider_finegrained.warm.state import pool_from_state, read_state

folder = sys.argv[1]
pool = pool_from_state(folder, read_state(folder))
with in_use(pool) as lease:
    sessions = ConnectSessions(pool.url, pool.ui_url, token=pool.token)
    if sys.argv[2] == "record":
        sessions.on_session = lease.record_session
    spark = sessions.open(StageJob("sleepy", [], {}, None))
    from pyspark.sql.functions import udf

    @udf("long")
    def slow(x):
        import time
        time.sleep(60)
        return x

    print("running", spark.session_id, flush=True)
    spark.range(0, 4, 1, 2).select(slow("id")).collect()
"""


def jobs(pool: WarmPool) -> list[dict[str, Any]]:
    answer: list[dict[str, Any]] = get_json(f"{pool.ui_url}/api/v1/applications/{pool.application_id}/jobs")
    return answer


def active_tasks(pool: WarmPool) -> int:
    executors = get_json(f"{pool.ui_url}/api/v1/applications/{pool.application_id}/executors")
    return sum(int(executor["activeTasks"]) for executor in executors)


@contextlib.contextmanager
def region_signalled_mid_job(pool: WarmPool, record: str, tmp_path: Path, sig: int) -> Iterator[tuple[int, float]]:
    """Start REGION, send it `sig` once its job runs; yield (the job's id, when); SIGKILL it on leaving."""
    assert pool.folder is not None
    before = {job["jobId"] for job in jobs(pool)}
    log = open(tmp_path / "region.log", "w")  # noqa: SIM115 - closed below
    region = subprocess.Popen([sys.executable, "-c", REGION, pool.folder, record], stdout=log, stderr=subprocess.STDOUT)
    try:

        def running() -> bool:
            assert region.poll() is None, (tmp_path / "region.log").read_text()[-3000:]
            return any(job["status"] == "RUNNING" and job["jobId"] not in before for job in jobs(pool))

        wait_until(running, 120, "the region's job to run in the pool")
        time.sleep(2)  # its tasks are in the UDF's sleep
        (job_id,) = [job["jobId"] for job in jobs(pool) if job["status"] == "RUNNING" and job["jobId"] not in before]
        region.send_signal(sig)
        yield job_id, time.monotonic()
    finally:
        region.kill()
        region.wait()
        log.close()


def kill_region_mid_job(pool: WarmPool, record: str, tmp_path: Path) -> tuple[int, float]:
    """Start REGION, SIGKILL it once its job runs; (the job's id, when it was killed)."""
    with region_signalled_mid_job(pool, record, tmp_path, signal.SIGKILL) as (job_id, killed_at):
        return job_id, killed_at


def job_stopped(pool: WarmPool, job_id: int) -> bool:
    (job,) = [job for job in jobs(pool) if job["jobId"] == job_id]
    return job["status"] != "RUNNING" and active_tasks(pool) == 0


def test_a_killed_regions_job_is_cancelled_by_the_pool_within_seconds(shared_pool: WarmPool, tmp_path: Path) -> None:
    assert shared_pool.folder is not None
    job_id, killed_at = kill_region_mid_job(shared_pool, "record", tmp_path)
    wait_until(lambda: job_stopped(shared_pool, job_id), 30, "the killed region's job to stop")
    took = time.monotonic() - killed_at
    (job,) = [job for job in jobs(shared_pool) if job["jobId"] == job_id]
    assert job["status"] == "FAILED", job  # cancelled: 4 rows of 60 s each would have run for minutes
    assert took < 10, f"the job stopped {took:.1f} s after its client was killed"
    log = (Path(shared_pool.folder) / "supervisor.log").read_text()
    assert "expired: its holder died; interrupting 1 Connect session(s)" in log
    session = (tmp_path / "region.log").read_text().split("running ", 1)[1].split()[0]
    assert f"session {session}: interrupted 1 operation(s)" in log
    assert os.listdir(Path(shared_pool.folder) / "leases") == []
    assert shared_pool.token is not None and shared_pool.token not in log
    # The pool itself is untouched and serves the next region, its cores free.
    check_health(shared_pool.url, token=shared_pool.token)


@pytest.mark.security
def test_an_external_server_named_by_a_connection_gets_its_token_from_the_password(
    shared_pool: WarmPool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from urllib.parse import urlsplit

    from airflow_provider_finegrained.warm import pool_for
    from tests.warm.conftest import small_settings

    port = urlsplit(shared_pool.url).port

    def connection(password: str | None) -> None:
        # localhost: the one host pyspark sends a token to in plaintext (docs/warm.md, "Your own client").
        conn = {"conn_type": "spark_connect", "host": "sc://localhost", "port": port, "password": password}
        monkeypatch.setenv("AIRFLOW_CONN_FG_CONNECT_POOL", json.dumps(conn))

    connection(shared_pool.token)
    pool = pool_for(small_settings(tmp_path, warm_pool="conn:fg_connect_pool"))
    assert pool is not None and (pool.url, pool.folder, pool.token) == (shared_pool.url, None, shared_pool.token)
    assert shared_pool.token is not None and shared_pool.token not in repr(pool)
    connection("a-wrong-token-0815")
    with pytest.raises(WarmPoolUnavailable, match="Invalid authentication token") as wrong:
        pool_for(small_settings(tmp_path, warm_pool="conn:fg_connect_pool"))
    assert "a-wrong-token-0815" not in str(wrong.value) and shared_pool.url in str(wrong.value)
    with pytest.raises(WarmPoolUnavailable, match="connection 'fg_no_such_pool' cannot be read"):
        pool_for(small_settings(tmp_path, warm_pool="conn:fg_no_such_pool"))


def test_a_frozen_regions_lease_expires_without_heartbeat_and_its_job_is_cancelled(
    shared_pool: WarmPool, tmp_path: Path
) -> None:
    from airflow_provider_finegrained.warm.state import LEASE_STALE_S

    assert shared_pool.folder is not None
    # SIGSTOP: the holder lives and keeps its lock, but its heartbeat stops.
    with region_signalled_mid_job(shared_pool, "record", tmp_path, signal.SIGSTOP) as (job_id, stopped_at):
        wait_until(lambda: job_stopped(shared_pool, job_id), LEASE_STALE_S + 20, "the frozen region's job to stop")
        took = time.monotonic() - stopped_at
        (job,) = [job for job in jobs(shared_pool) if job["jobId"] == job_id]
        assert job["status"] == "FAILED", job
        assert LEASE_STALE_S - 3 < took < LEASE_STALE_S + 15, took
        log = (Path(shared_pool.folder) / "supervisor.log").read_text()
        assert "expired: no heartbeat for" in log
        assert os.listdir(Path(shared_pool.folder) / "leases") == []


@pytest.mark.security
def test_an_idle_pool_without_a_token_is_replaced_by_a_locked_one(shared_pool: WarmPool, tmp_path: Path) -> None:
    # Last in this module: it replaces the shared pool (the fixture stops whatever runs in the folder).
    from airflow_provider_finegrained.warm import ensure_started
    from tests.warm.conftest import server_jvms, small_settings

    assert shared_pool.folder is not None
    old_jvms = server_jvms(shared_pool.folder)
    (Path(shared_pool.folder) / "token").unlink()  # as a pool started before pools were locked
    pool = ensure_started(small_settings(Path(shared_pool.folder).parent), shared_pool.folder, idle_timeout_s=0)
    assert pool.url != shared_pool.url and pool.token and pool.token != shared_pool.token
    assert server_jvms(shared_pool.folder) != old_jvms and len(server_jvms(shared_pool.folder)) == 1
    check_health(pool.url, token=pool.token)
