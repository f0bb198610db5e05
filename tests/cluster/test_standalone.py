"""The local standalone cluster: start, state file, status, the CLI, losing a worker, stopping everything."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from airflow_provider_finegrained.launchers.standalone import client as drivers
from airflow_provider_finegrained.settings import ConnectionSettings
from airflow_provider_finegrained.spark.process import SparkSubmitProcess, SubmitResult
from airflow_provider_finegrained.spark.standalone import (
    ClusterNotFoundError,
    ClusterStartError,
    StandaloneCluster,
    load_cluster,
    stop_local_cluster,
)
from airflow_provider_finegrained.spark.standalone_start import start_local_cluster
from airflow_provider_finegrained.spark.submit import SubmitRequest, build_spark_submit_command, build_spark_submit_env
from tests.cluster.conftest import assert_all_gone, sleeping_app
from tests.conftest import REPO

pytestmark = [pytest.mark.slow, pytest.mark.cluster]


def _cli(*args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "airflow_provider_finegrained", "cluster", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=REPO,
        check=False,
    )


def test_the_cluster_is_alive_with_every_worker(standalone_cluster: StandaloneCluster) -> None:
    status = standalone_cluster.status()
    assert status["status"] == "ALIVE"
    assert status["url"] == standalone_cluster.master_url
    assert standalone_cluster.master_url.startswith("spark://127.0.0.1:")
    workers = [w for w in status["workers"] if w["state"] == "ALIVE"]
    assert len(workers) == 2
    assert {w["webuiaddress"] for w in workers} == set(standalone_cluster.worker_webui_urls)
    assert [w["cores"] for w in workers] == [2, 2]
    assert [w["memory"] for w in workers] == [4096, 4096]
    # Nothing was opened on Spark's default ports, which other clusters on this machine may hold.
    for url in (standalone_cluster.master_url, standalone_cluster.webui_url, *standalone_cluster.worker_webui_urls):
        assert int(url.rsplit(":", 1)[1]) not in (6066, 7077, 8080, 8081)
    master_log = next(Path(standalone_cluster.log_dir).glob("*master.Master-1-*.out")).read_text()
    assert "Starting Spark master at " + standalone_cluster.master_url in master_log
    assert "REST server" not in master_log


def test_the_state_file_describes_the_running_cluster(standalone_cluster: StandaloneCluster) -> None:
    state = json.loads(Path(standalone_cluster.work_dir, "cluster.json").read_text())
    assert state["master_url"] == standalone_cluster.master_url
    assert state["webui_url"] == standalone_cluster.webui_url
    assert state["worker_webui_urls"] == list(standalone_cluster.worker_webui_urls)
    assert state["ports"]["master"] == int(standalone_cluster.master_url.rsplit(":", 1)[1])
    assert len(state["ports"]["workers"]) == 2
    assert load_cluster(standalone_cluster.work_dir) == standalone_cluster
    # The recorded pids are the daemons' JVMs, and the daemons are all the cluster runs while idle.
    daemon_pids = {standalone_cluster.master_pid, *standalone_cluster.worker_pids}
    assert {p.pid for p in standalone_cluster.processes()} == daemon_pids
    for pid in daemon_pids:
        assert psutil.Process(pid).name() == "java"
    assert "org.apache.spark.deploy.master.Master" in psutil.Process(standalone_cluster.master_pid).cmdline()


def test_a_second_start_in_the_same_directory_is_refused(standalone_cluster: StandaloneCluster) -> None:
    with pytest.raises(ClusterStartError, match="already runs"):
        start_local_cluster(standalone_cluster.work_dir)
    assert standalone_cluster.status()["aliveworkers"] == 2


def test_settings_are_checked_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"memory_per_worker.*allowed"):
        start_local_cluster(str(tmp_path), memory_per_worker="lots")
    with pytest.raises(ValueError, match="workers: 0"):
        start_local_cluster(str(tmp_path), workers=0)
    with pytest.raises(ClusterNotFoundError, match="cluster start --dir"):
        stop_local_cluster(str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def _wait_for_log(cluster: StandaloneCluster, driver_id: str, text: str, timeout_s: float = 300) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if drivers.driver_log_url(cluster.json_url, driver_id) is not None:
            log = drivers.read_driver_log(cluster.json_url, driver_id, "stdout")
            if text in log:
                return log
        time.sleep(1)
    raise AssertionError(f"{driver_id} did not print {text!r} within {timeout_s} s")


def test_cli_cluster_losing_a_worker_and_stopping_with_applications_running(tmp_path: Path) -> None:
    """A cluster from the CLI; SIGKILL one worker under a running application; stop removes everything."""
    work_dir = tmp_path / "cli-cluster"
    started = _cli("start", "--dir", str(work_dir), "--workers", "2", "--cores", "2", "--memory", "2g")
    cluster: StandaloneCluster | None = None
    try:
        assert started.returncode == 0, started.stderr
        cluster = load_cluster(str(work_dir))
        lines = started.stdout.splitlines()
        assert lines[0] == f"master:  {cluster.master_url}"
        assert lines[1] == f"web UI:  {cluster.webui_url}"
        # The printed connection is ready to paste, and the provider accepts it.
        add = shlex.split(next(line for line in lines if line.startswith("airflow connections add")))
        host = add[add.index("--conn-host") + 1]
        extra = json.loads(add[add.index("--conn-extra") + 1])
        assert host == cluster.master_url
        assert extra == {
            "master_webui_url": cluster.webui_url,
            "total_cores": 4,
            "total_memory": "4g",
            "executor_cores": 2,
            "executor_memory": "1536m",
            "storage_root": str(work_dir / "storage"),
            "spark_conf": {"spark.pyspark.python": sys.executable},
        }
        settings = ConnectionSettings.from_connection_fields(host, extra, airflow_home=str(tmp_path))
        assert (settings.total_cores, settings.executor_cores) == (4, 2)

        status = _cli("status", "--dir", str(work_dir))
        assert status.returncode == 0, status.stderr
        assert f"master:  {cluster.master_url} (ALIVE)" in status.stdout
        assert "workers: 2 alive of 2" in status.stdout

        # A cluster-mode application with one executor on each worker (1 core each, next to the driver).
        request = SubmitRequest(
            application=sleeping_app(tmp_path),
            master=cluster.master_url,
            deploy_mode="cluster",
            name="sleeper",
            conf={"spark.executor.cores": "1", "spark.executor.memory": "512m", "spark.cores.max": "2"},
            driver_memory="512m",
        )
        process = SparkSubmitProcess(
            build_spark_submit_command(request), build_spark_submit_env(request), on_line=lambda _line: None
        )
        process.start()
        results: list[SubmitResult] = []
        waiter = threading.Thread(target=lambda: results.append(process.wait()))
        waiter.start()
        deadline = time.monotonic() + 120
        while process.driver_id is None and time.monotonic() < deadline:
            time.sleep(0.5)
        assert process.driver_id is not None
        _wait_for_log(cluster, process.driver_id, "STARTED")

        # Lose the worker that does not run the driver: the application loses an executor and goes on.
        status_now = cluster.status()
        driver = drivers.find_driver(status_now, process.driver_id)
        assert driver is not None
        driver_ui = next(w["webuiaddress"] for w in status_now["workers"] if w["id"] == driver["worker"])
        lost = 1 - cluster.worker_webui_urls.index(driver_ui)
        lost_pids = [p.pid for p in cluster.processes(lost)]
        assert len(lost_pids) > 1  # the worker and the executor it runs
        cluster.kill_worker(lost)
        assert_all_gone(lost_pids)
        assert cluster.processes(lost) == []
        other = 1 - lost
        assert psutil.pid_exists(cluster.worker_pids[other])
        # The master notices the lost worker (its connection dropped) and stops counting it.
        deadline = time.monotonic() + 60
        while cluster.status()["aliveworkers"] != 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        assert cluster.status()["aliveworkers"] == 1
        assert drivers.driver_state(cluster.json_url, process.driver_id) == "RUNNING"

        everything = [p.pid for p in cluster.processes()]
        stopped = _cli("stop", "--dir", str(work_dir))
        assert stopped.returncode == 0, stopped.stderr
        assert stopped.stdout.strip() == f"stopped {cluster.master_url} ({cluster.work_dir})"
        assert_all_gone(everything)
        assert cluster.processes() == []
        assert not (work_dir / "cluster.json").exists()
        waiter.join(timeout=60)
        assert results and results[0].returncode != 0  # spark-submit saw its driver's master go away
        after = _cli("status", "--dir", str(work_dir))
        assert after.returncode == 1
        assert "not running" in after.stderr
    finally:
        if cluster is not None and cluster.processes():
            cluster.stop()
        if cluster is not None:
            assert cluster.processes() == []


def test_a_stopped_cluster_starts_again_in_the_same_directory_at_once(tmp_path: Path) -> None:
    # A stopped daemon stays a java zombie until init reaps it; its pid file must not block a restart.
    for _ in range(2):
        cluster = start_local_cluster(str(tmp_path), workers=1, cores_per_worker=1, memory_per_worker="1g")
        try:
            assert cluster.status()["aliveworkers"] == 1
            pids = [p.pid for p in cluster.processes()]
            assert len(pids) == 2
        finally:
            cluster.stop()
        assert cluster.processes() == []
        assert_all_gone(pids)
        assert list((tmp_path / "pids").iterdir()) == []
        with pytest.raises(ClusterNotFoundError):
            load_cluster(str(tmp_path))
