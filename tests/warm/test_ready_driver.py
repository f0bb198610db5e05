"""The pool's ready region driver: a fresh task process hands its region to a pre-imported driver.

Real parts: the session's embedded warm pool (tests/conftest.py), its ready driver, the warm launcher in
a fresh Python process (as an Airflow task is), real Spark Connect sessions. One test proves the outputs
match the in-process path, that a killed task leaves no process and no Spark job behind, and that a task
facing a hung driver gives up on it within its bound and runs the region itself.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pyarrow.parquet as pq
import pytest

from airflow_provider_finegrained.launchers.http import get_json
from airflow_provider_finegrained.warm import WarmPool
from airflow_provider_finegrained.warm.driver_protocol import SOCKET_NAME
from airflow_provider_finegrained.warm.state import DRIVER_LOG
from tests.conftest import embedded_settings
from tests.warm.conftest import alive, wait_until

pytestmark = pytest.mark.slow

NUMBERS = """
import os
from airflow_provider_finegrained.runtime.api import current_stage

stage = current_stage()
partitions = stage.spark.conf.get("spark.sql.shuffle.partitions")
print(f"numbers sees {partitions} shuffle partitions, TASK_MARK={os.environ.get('TASK_MARK')}", flush=True)
stage.publish(stage.spark.range(1000).selectExpr("id AS n", "id % 7 AS key", f"'{partitions}' AS partitions"))
"""

TOTALS = """
from airflow_provider_finegrained.runtime.api import current_stage

stage = current_stage()
stage.publish(stage.inputs["numbers"].groupBy("key", "partitions").sum("n").withColumnRenamed("sum(n)", "total"))
"""

SLOW = """
from pyspark.sql.functions import udf
from airflow_provider_finegrained.runtime.api import current_stage

@udf("long")
def slow(x):
    import time
    time.sleep(600)  # still running when the test kills its task, however long the other region took
    return x

stage = current_stage()
print("slow stage running", flush=True)
# One task: the pool has 2 cores and the region compared meanwhile needs one. (Two tasks here held both
# for 1,200 s whenever this job reached the scheduler first: the other region then waited with 0 tasks
# running, which is how this test once "hung" in the full suite.)
stage.publish(stage.spark.range(0, 1, 1, 1).select(slow("id").alias("n")).localCheckpoint())
"""

# A task as Airflow runs it: a fresh Python process that runs one region through the warm launcher.
TASK = """
import json, logging, sys, time
began = time.time()
logging.basicConfig(level=logging.INFO, format="%(message)s")
from airflow_provider_finegrained.settings import ConnectionSettings
from airflow_provider_finegrained.launchers.base import LaunchSpec
from airflow_provider_finegrained.launchers.warm import WarmLauncher
from airflow_provider_finegrained.warm.state import pool_from_state, read_state

folder, job_path, home, accept_timeout = sys.argv[1:5]
if accept_timeout:
    import airflow_provider_finegrained.warm.driver_client as driver_client
    driver_client.ACCEPT_TIMEOUT_S = float(accept_timeout)
pool = pool_from_state(folder, read_state(folder))
launcher = WarmLauncher(ConnectionSettings.embedded_default(airflow_home=home), pool)
print("TASK_PID", flush=True)
result = launcher.wait(launcher.submit(LaunchSpec("region-0", "ready-driver-test", job_path)))
imported = "pyspark.sql.connect.session" in sys.modules
print("RESULT " + json.dumps({"returncode": result.returncode, "connect_imported": imported, "began": began}))
"""


def write_job(folder: Path, apps: dict[str, str], *, handover: bool) -> str:
    from airflow_provider_finegrained.runtime.job import InputRef, RegionJob, StageJob

    folder.mkdir(parents=True)
    stages = []
    for name, code in apps.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(code))
        inputs = [InputRef("numbers", "stage", stage="numbers")] if name == "totals" else []
        stages.append(
            StageJob(
                name,
                inputs,
                {"spark.sql.shuffle.partitions": "3"},
                str(folder / "out" / name) if name != "numbers" or not handover else None,
                application=str(folder / f"{name}.py"),
                handover=handover and name == "numbers",
            )
        )
    job = RegionJob("region-0", "ready_driver", "manual__1", 1, str(folder), str(folder), stages)
    return job.dump()


def table(folder: Path, stage: str) -> list[dict[str, Any]]:
    from airflow_provider_finegrained.runtime.output import read_committed

    committed = read_committed(str(folder / "out" / stage))
    rows = pq.ParquetDataset([u.removeprefix("file://") for u in committed.uris]).read().to_pylist()
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True))


def statuses(folder: Path) -> dict[str, str]:
    return {p.name: json.loads(p.read_text())["state"] for p in folder.glob("status-*.json")}


def driver_info(pool: WarmPool) -> dict[str, Any]:
    from airflow_provider_finegrained.warm import status

    assert pool.folder is not None
    info = status(pool.folder)
    assert info is not None and info.get("driver_pid"), info
    return info


def driver_children(pool: WarmPool) -> list[psutil.Process]:
    children = psutil.Process(driver_info(pool)["driver_pid"]).children()
    return [p for p in children if p.status() != psutil.STATUS_ZOMBIE]


@pytest.fixture(scope="module")
def pool(warm_pool_folder: str) -> Iterator[WarmPool]:
    from airflow_provider_finegrained import warm

    pool = warm.ensure_started(embedded_settings())
    socket = Path(warm_pool_folder) / SOCKET_NAME
    wait_until(socket.exists, 120, "the pool's ready driver to listen")
    yield pool


def start_task(
    pool: WarmPool, job_path: str, tmp_path: Path, log: Path, accept_timeout_s: float | None = None
) -> subprocess.Popen[bytes]:
    assert pool.folder is not None
    env = {**os.environ, "TASK_MARK": "from-the-task"}
    timeout = "" if accept_timeout_s is None else str(accept_timeout_s)
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-c", TASK, pool.folder, job_path, str(tmp_path), timeout],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )


def test_a_fresh_task_runs_its_region_in_the_ready_driver_as_in_process_and_leaves_nothing_when_killed(
    pool: WarmPool, tmp_path: Path
) -> None:
    from airflow_provider_finegrained.runtime.connect_region import ConnectSessions, run_region_warm
    from airflow_provider_finegrained.runtime.job import RegionJob

    apps = {"numbers": NUMBERS, "totals": TOTALS}
    # Two tasks at once (each a fresh process that never imports pyspark's Connect client): one region to
    # compare with the in-process path, one slow region to kill. Started together to keep the test short.
    slow, slow_log = tmp_path / "slow", tmp_path / "slow.log"
    before = {job["jobId"] for job in jobs(pool)}
    killed = start_task(pool, write_job(slow, {"slow": SLOW}, handover=False), tmp_path, slow_log)
    driven, log = tmp_path / "driven", tmp_path / "task.log"
    task = start_task(pool, write_job(driven, apps, handover=True), tmp_path, log)
    try:
        # The same region in this process (the fallback path), meanwhile.
        local = tmp_path / "local"
        job = RegionJob.load(write_job(local, apps, handover=True))
        assert run_region_warm(job, ConnectSessions(pool.url, pool.ui_url, token=pool.token)) is None

        finish(task, 180, pool, log, slow_log)
        output = log.read_text()
        result = json.loads(output.split("RESULT ", 1)[1])
        assert result["returncode"] == 0 and result["connect_imported"] is False, output
        assert "Region region-0 runs in the warm pool's ready region driver (child pid " in output, output
        # The stage's lines (and the task's environment) came back through the driver.
        assert "numbers sees 3 shuffle partitions, TASK_MARK=from-the-task" in output, output
        assert "[finegrained] stage totals: committed 7 rows" in output, output
        assert (
            statuses(driven) == statuses(local) == {"status-numbers.json": "success", "status-totals.json": "success"}
        )
        assert table(driven, "totals") == table(local, "totals")
        assert len(table(driven, "totals")) == 7 and {row["partitions"] for row in table(driven, "totals")} == {"3"}

        # The slow task killed (SIGKILL, no word) mid-job: its child in the driver and its Spark job end in seconds.
        wait_until(
            lambda: "slow stage running" in slow_log.read_text() and running_job(pool, before) is not None,
            120,
            "the slow job",
        )
        children = driver_children(pool)
        assert len(children) == 1, children
        job_id = running_job(pool, before)
        killed_at = time.monotonic()
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        wait_until(lambda: not alive(children[0].pid), 15, "the task's child in the driver to exit")
        wait_until(
            lambda: not any(j["jobId"] == job_id and j["status"] == "RUNNING" for j in jobs(pool)), 30, "the job"
        )
        assert time.monotonic() - killed_at < 20
        assert driver_children(pool) == []
        assert not any((slow / "out").rglob("_COMMITTED*")) if (slow / "out").exists() else True

        # A hung driver (stopped: the kernel still queues the connection, nobody accepts): the task gives
        # up on it after its bound and runs the region itself, saying so.
        driver_pid = driver_info(pool)["driver_pid"]
        os.kill(driver_pid, signal.SIGSTOP)
        try:
            fallback, fallback_log = tmp_path / "fallback", tmp_path / "fallback.log"
            hung = start_task(pool, write_job(fallback, apps, handover=True), tmp_path, fallback_log, 2.0)
            finish(hung, 180, pool, fallback_log)
        finally:
            os.kill(driver_pid, signal.SIGCONT)
        output = fallback_log.read_text()
        result = json.loads(output.split("RESULT ", 1)[1])
        assert result["returncode"] == 0 and result["connect_imported"] is True, output
        assert (
            "The warm pool's ready region driver did not take region region-0 (it did not accept the region "
            "within 2 s): it runs in this task process"
        ) in output, output
        assert table(fallback, "totals") == table(local, "totals")
    finally:
        for process in (task, killed):
            if process.poll() is None:
                process.kill()
                process.wait()


def finish(task: subprocess.Popen[bytes], timeout_s: float, pool: WarmPool, *logs: Path) -> None:
    """Wait for a task to exit 0; on a timeout or a failure, say what the task, the driver and Spark were doing."""
    try:
        code = task.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        task.kill()
        task.wait()
        pytest.fail(f"the task did not finish in {timeout_s:g} s\n{diagnosis(pool, logs)}")
    if code != 0:
        pytest.fail(f"the task exited with {code}\n{diagnosis(pool, logs)}")


def diagnosis(pool: WarmPool, logs: tuple[Path, ...]) -> str:
    assert pool.folder is not None
    parts = [f"--- {log.name}\n{log.read_text()[-3000:]}" for log in logs]
    driver_log = Path(pool.folder) / DRIVER_LOG
    parts.append(f"--- {DRIVER_LOG}\n{driver_log.read_text()[-3000:] if driver_log.exists() else '(none)'}")
    try:
        stages = get_json(f"{pool.ui_url}/api/v1/applications/{pool.application_id}/stages?status=active")
        active = [(s["stageId"], s["numActiveTasks"], s["numTasks"], s["name"][:80]) for s in stages]
        parts.append(f"--- the pool's active stages (id, running tasks, tasks, name)\n{active}")
    except Exception as exc:  # the diagnosis must not hide the failure
        parts.append(f"--- the pool's active stages: not read ({exc})")
    return "\n".join(parts)


def jobs(pool: WarmPool) -> list[dict[str, Any]]:
    answer: list[dict[str, Any]] = get_json(f"{pool.ui_url}/api/v1/applications/{pool.application_id}/jobs")
    return answer


def running_job(pool: WarmPool, before: set[int]) -> int | None:
    running = [job["jobId"] for job in jobs(pool) if job["status"] == "RUNNING" and job["jobId"] not in before]
    return running[0] if running else None
