"""Python applications in cluster deploy mode on the real standalone cluster: finish, fail, get killed."""

from __future__ import annotations

import ast
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from airflow_provider_finegrained.launchers.standalone import client as drivers
from airflow_provider_finegrained.spark.process import SparkSubmitProcess, SubmitResult, run_spark_submit
from airflow_provider_finegrained.spark.standalone import StandaloneCluster
from airflow_provider_finegrained.spark.submit import SubmitRequest, build_spark_submit_command, build_spark_submit_env
from tests.cluster.conftest import assert_all_gone, sleeping_app

pytestmark = pytest.mark.slow

# Small enough that two applications (driver + one executor each) fit the 4 cores at once.
APP_CONF = {"spark.executor.cores": "1", "spark.executor.memory": "512m", "spark.cores.max": "1"}


def _request(cluster: StandaloneCluster, app: Path, *args: str, py_files: tuple[str, ...] = ()) -> SubmitRequest:
    return SubmitRequest(
        application=str(app),
        master=cluster.master_url,
        deploy_mode="cluster",
        name=app.stem,
        conf=APP_CONF,
        application_args=args,
        py_files=py_files,
        driver_memory="512m",
    )


def _run(request: SubmitRequest) -> SubmitResult:
    lines: list[str] = []
    result = run_spark_submit(build_spark_submit_command(request), build_spark_submit_env(request), lines.append)
    # SubmitResult keeps the last lines only; the driver id comes early.
    assert result.driver_id is not None, "\n".join(lines)
    return result


def _application_processes(cluster: StandaloneCluster) -> list[psutil.Process]:
    daemons = {cluster.master_pid, *cluster.worker_pids}
    return [p for p in cluster.processes() if p.pid not in daemons]


def _start_in_background(request: SubmitRequest) -> tuple[SparkSubmitProcess, list[SubmitResult], threading.Thread]:
    process = SparkSubmitProcess(
        build_spark_submit_command(request), build_spark_submit_env(request), on_line=lambda _line: None
    )
    process.start()
    results: list[SubmitResult] = []
    waiter = threading.Thread(target=lambda: results.append(process.wait()))
    waiter.start()
    return process, results, waiter


def _kill_detached_then_die(cluster: StandaloneCluster, driver_id: str) -> int | None:
    """Call kill_detached in a process, SIGKILL that process once its killer child runs; its exit code."""
    code = (
        "from airflow_provider_finegrained.launchers.standalone.client import kill_detached;"
        f"kill_detached({cluster.master_url!r}, {driver_id!r}, webui_json_url={cluster.json_url!r})"
    )
    caller = psutil.Popen([sys.executable, "-c", code])
    deadline = time.monotonic() + 60
    while not any("launchers.standalone.client" in " ".join(c.cmdline()) for c in caller.children()):
        assert time.monotonic() < deadline and caller.poll() is None, "kill_detached started no killer"
        time.sleep(0.1)
    caller.kill()
    return caller.wait(timeout=10)


def test_a_python_application_runs_its_driver_on_a_worker_and_finishes(
    standalone_cluster: StandaloneCluster, tmp_path: Path
) -> None:
    helper = tmp_path / "deps" / "helper.py"
    helper.parent.mkdir()
    helper.write_text("FACTOR = 3\n")
    app = tmp_path / "writer.py"
    app.write_text(
        "import os, sys\n"
        "from pyspark.sql import SparkSession\n"
        "import helper\n"
        "spark = SparkSession.builder.getOrCreate()\n"
        "def times(i):\n"
        "    import helper  # on the executors, from --py-files\n"
        "    return i * helper.FACTOR\n"
        "values = spark.sparkContext.parallelize(range(4), 2).map(times).collect()\n"
        "out = {'values': values, 'argv': sys.argv[1:], 'cwd': os.getcwd(), 'python': sys.executable,\n"
        "       'app': spark.sparkContext.applicationId, 'master': spark.sparkContext.master}\n"
        "open(sys.argv[1], 'w').write(repr(out))\n"
        "spark.stop()\n"
    )
    out = tmp_path / "out.txt"
    started = time.monotonic()
    result = _run(_request(standalone_cluster, app, str(out), "--conf", "a b", py_files=(str(helper),)))
    elapsed = time.monotonic() - started

    assert result.returncode == 0, "\n".join(result.tail)
    assert result.driver_id is not None and result.driver_id.startswith("driver-")
    assert any(f"State of driver {result.driver_id} is FINISHED, exiting" in line for line in result.tail)
    assert drivers.driver_state(standalone_cluster.json_url, result.driver_id) == "FINISHED"
    written = ast.literal_eval(out.read_text())
    assert written["values"] == [0, 3, 6, 9]
    assert written["argv"] == [str(out), "--conf", "a b"]
    assert written["master"] == standalone_cluster.master_url
    # The driver ran inside a worker's directory for it, under the interpreter of this test.
    assert any(written["cwd"] == f"{d}/{result.driver_id}" for d in standalone_cluster.worker_dirs)
    assert written["python"] == sys.executable
    stderr = drivers.read_driver_log(standalone_cluster.json_url, result.driver_id, "stderr", from_start=True)
    assert "DriverWrapper" in stderr
    assert drivers.driver_application_id(standalone_cluster.json_url, result.driver_id) == written["app"]
    assert not drivers.application_running(standalone_cluster.json_url, written["app"])
    assert _application_processes(standalone_cluster) == []
    print(f"cluster-mode submit of a trivial application: {elapsed:.1f} s")


def test_a_failing_application_exits_non_zero_with_state_failed(
    standalone_cluster: StandaloneCluster, tmp_path: Path
) -> None:
    app = tmp_path / "failing.py"
    app.write_text("raise RuntimeError('boom from the driver')\n")
    result = _run(_request(standalone_cluster, app))
    assert result.driver_id is not None
    state = drivers.driver_state(standalone_cluster.json_url, result.driver_id)
    assert state in ("FAILED", "ERROR")
    assert result.returncode == 1
    assert result.tail[-1] == f"[finegrained] driver {result.driver_id} ended in state {state}"
    stdout = drivers.read_driver_log(standalone_cluster.json_url, result.driver_id, "stdout")
    assert "RuntimeError: boom from the driver" in stdout
    # Killing a driver that already ended reports how it ended, without asking the master to kill.
    assert (
        drivers.kill_driver(standalone_cluster.master_url, result.driver_id, webui_json_url=standalone_cluster.json_url)
        == state
    )
    assert _application_processes(standalone_cluster) == []


def test_unknown_drivers(standalone_cluster: StandaloneCluster) -> None:
    unknown = "driver-20000101000000-9999"
    assert drivers.driver_state(standalone_cluster.json_url, unknown) is None
    assert drivers.driver_log_url(standalone_cluster.json_url, unknown) is None
    with pytest.raises(drivers.DriverNotFoundError, match=unknown):
        drivers.wait_for_driver_end(standalone_cluster.json_url, unknown, timeout_s=1)
    with pytest.raises(drivers.DriverNotFoundError, match=unknown):
        drivers.kill_driver(standalone_cluster.master_url, unknown, webui_json_url=standalone_cluster.json_url)
    with pytest.raises(drivers.DriverKillError, match="has already finished or does not exist"):
        drivers.kill_driver(standalone_cluster.master_url, unknown, timeout_s=60)
    with pytest.raises(ValueError, match="driver_id"):
        drivers.driver_state(standalone_cluster.json_url, "app-20000101000000-0001")


def test_long_running_drivers_are_killed_with_everything_they_started(
    standalone_cluster: StandaloneCluster, tmp_path: Path
) -> None:
    app = Path(sleeping_app(tmp_path))
    # Two at once: one is killed following the master's /json/, the other by the submission client alone.
    runs: list[tuple[SparkSubmitProcess, list[SubmitResult], threading.Thread]] = []
    for _ in range(2):
        request = _request(standalone_cluster, app)
        runs.append(_start_in_background(request))
    try:
        app_ids = []
        for process, _, _ in runs:
            deadline = time.monotonic() + 120
            while process.driver_id is None and time.monotonic() < deadline:
                time.sleep(0.5)
            assert process.driver_id is not None
            deadline = time.monotonic() + 300
            log = ""
            while "STARTED" not in log and time.monotonic() < deadline:
                time.sleep(1)
                if drivers.driver_log_url(standalone_cluster.json_url, process.driver_id):
                    log = drivers.read_driver_log(standalone_cluster.json_url, process.driver_id)
            assert "STARTED" in log
            app_ids.append(log.split("STARTED ", 1)[1].split()[0])
        status = standalone_cluster.status()
        assert {d["id"] for d in status["activedrivers"]} == {p.driver_id for p, _, _ in runs}
        assert {a["id"] for a in status["activeapps"]} == set(app_ids)
        # Per application: the driver JVM, its Python, an executor JVM and the executor's Python workers.
        before = _application_processes(standalone_cluster)
        names = [p.name() for p in before]
        assert names.count("java") == 4 and names.count("python") >= 2, names

        first, second = (p.driver_id for p, _, _ in runs)
        assert first is not None and second is not None
        # The first through kill_detached, from a process SIGKILLed once it has started the kill, as Airflow's
        # supervisor SIGKILLs a task it told to stop: the kill outlives its caller and still lands.
        started = time.monotonic()
        caller = _kill_detached_then_die(standalone_cluster, first)
        json_url = standalone_cluster.json_url
        deadline = time.monotonic() + 120
        while drivers.driver_state(json_url, first) not in drivers.FINAL_DRIVER_STATES or drivers.application_running(
            json_url, app_ids[0]
        ):
            assert time.monotonic() < deadline, f"driver {first} outlived its killed caller (exit {caller})"
            time.sleep(0.5)
        kill_with_json_s = time.monotonic() - started
        assert drivers.driver_state(json_url, first) == "KILLED"
        started = time.monotonic()
        assert drivers.kill_driver(standalone_cluster.master_url, second) == "KILLED"
        kill_with_client_s = time.monotonic() - started

        status = standalone_cluster.status()
        assert status["activedrivers"] == [] and status["activeapps"] == []
        completed = {a["id"]: a["state"] for a in status["completedapps"]}
        assert all(app_id in completed for app_id in app_ids)
        # The driver JVMs, their Python processes (which exit with their JVM) and the executors are gone.
        deadline = time.monotonic() + 30
        while _application_processes(standalone_cluster) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert _application_processes(standalone_cluster) == []
        assert_all_gone([p.pid for p in before])
        for process, results, waiter in runs:
            waiter.join(timeout=60)
            assert results[0].returncode == 1
            assert results[0].tail[-1] == f"[finegrained] driver {process.driver_id} ended in state KILLED"
        print(f"kill following /json/: {kill_with_json_s:.1f} s; kill by the client alone: {kill_with_client_s:.1f} s")
    finally:
        for process, _, waiter in runs:
            process.kill()
            waiter.join(timeout=60)
