"""Warm mode end to end: regions run as Spark Connect sessions in a pool the provider starts on demand.

Real Airflow (dag.test, `airflow tasks test`) and a real Spark Connect server in local mode; the pool
is the embedded default's (`AIRFLOW__FINEGRAINED__WARM_POOL=auto`), shared by the module and stopped
at its end with every process it started.
"""

from __future__ import annotations

import json
import os
import signal
import time
import urllib.request
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_provider_finegrained.cli.report import stage_results
from tests.conftest import embedded_settings
from tests.e2e.conftest import load_dag, start_task_test, write_dag_file

pytestmark = pytest.mark.slow


HEADER = """
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage
from airflow_provider_finegrained.dags.declaration import Input

START = pendulum.datetime(2026, 1, 1, tz="UTC")
"""


def run(dag_id: str, body: str) -> tuple[str, dict[str, str], dict[str, dict[str, Any]]]:
    path = write_dag_file(f"{dag_id}.py", HEADER + body)
    dag_run = load_dag(path, dag_id).test()
    states = {ti.task_id: ti.state for ti in dag_run.get_task_instances()}
    return dag_run.run_id, states, stage_results(dag_id, dag_run.run_id)[1]


HELLO = """
def numbers(spark):
    return spark.range(10_000).withColumnRenamed("id", "n")

def squares(spark, numbers):
    return numbers.selectExpr("n", "n * n AS square")

def zone(spark, squares):
    # A setting changed by stage code stays in that stage's session.
    spark.conf.set("spark.sql.session.timeZone", "Asia/Tokyo")
    return squares.limit(1).selectExpr("current_timezone() AS tz")

def next_zone(spark, zone):
    return zone.selectExpr("tz AS before", "current_timezone() AS mine")

with DAG("warm_hello", schedule=None, start_date=START):
    n = Stage(task_id="numbers", python_callable=numbers)
    s = Stage(task_id="squares", python_callable=squares, inputs={"numbers": Input(n, mode="pipelined")})
    z = Stage(task_id="zone", python_callable=zone, inputs={"squares": Input(s)})
    Stage(task_id="next_zone", python_callable=next_zone, inputs={"zone": Input(z)})
"""


def test_regions_run_warm_in_one_pool_with_a_session_per_stage(warm_pool_folder: str) -> None:
    from airflow_provider_finegrained import warm

    first_id, states, first = run("warm_hello", HELLO)
    assert set(states.values()) == {"success"}, states
    pool = warm.status(warm_pool_folder)
    assert pool is not None and pool["url"].startswith("sc://localhost:")
    for stage, result in first.items():
        execution = result["trace"]["execution"]
        assert execution["mode"] == "warm", (stage, execution)
        assert execution["pool"] == pool["url"]
        assert "every slot fits the pool's executors: local JVM" in execution["reason"]
        assert result["trace"]["capacity"]["outcome"] == "warm_pool"
    # A session per stage, also inside the pipelined region numbers -> squares (handover in memory).
    sessions = [r["trace"]["execution"]["session"] for r in first.values()]
    assert len(set(sessions)) == len(sessions) == 4
    assert first["numbers"]["trace"]["region"] == first["squares"]["trace"]["region"]
    assert first["numbers"]["output"]["in_memory_only"] is True
    table = pq.read_table(first["squares"]["output"]["path"])
    assert table.num_rows == 10_000 and max(table.column("square").to_pylist()) == 9_999**2
    assert first["squares"]["trace"]["spark_tasks"]["executors"] == ["driver"]
    assert first["squares"]["trace"]["spark_conf"]["spark.sql.shuffle.partitions"] == str(
        first["squares"]["trace"]["parallelism"]
    )
    # Stage code's own setting did not leak into the next stage's session.
    zones = pq.read_table(first["next_zone"]["output"]["path"]).to_pylist()
    assert zones[0]["before"] == "Asia/Tokyo" and zones[0]["mine"] != "Asia/Tokyo"
    assert "start_s" in first["numbers"]["trace"]["timings"]

    # A second run reuses the running pool: same server, same application, new sessions.
    second_id, states, second = run("warm_hello", HELLO)
    assert second_id != first_id and set(states.values()) == {"success"}
    again = warm.status(warm_pool_folder)
    assert again is not None and again["url"] == pool["url"]
    assert again.get("application_id") == pool.get("application_id")
    assert second["squares"]["trace"]["application_id"] == first["squares"]["trace"]["application_id"]
    assert not {r["trace"]["execution"]["session"] for r in second.values()} & set(sessions)


MISFITS = """
def uses_rdd(spark):
    return spark.sparkContext.parallelize([1, 2, 3]).toDF()

def static_conf(spark):
    return spark.range(5)

with DAG("warm_misfits", schedule=None, start_date=START):
    Stage(task_id="uses_rdd", python_callable=uses_rdd)
    Stage(task_id="static_conf", python_callable=static_conf, spark_conf={"spark.executor.memoryOverhead": "512m"})
"""


def test_what_the_pool_cannot_run_is_named(warm_pool_folder: str, capfd: pytest.CaptureFixture[str]) -> None:
    _, states, results = run("warm_misfits", MISFITS)
    assert states == {"uses_rdd": "failed", "static_conf": "success"}
    text = "".join(capfd.readouterr())
    assert "stage 'uses_rdd' uses an API that Spark Connect cannot run (SparkContext, RDDs)" in text
    assert "give it warm=False (or set warm_pool 'off' on the connection)" in text
    # A setting only a fresh application takes: that region ran cold, and says why.
    execution = results["static_conf"]["trace"]["execution"]
    assert execution["mode"] == "cold"
    assert "static_conf sets spark.executor.memoryOverhead" in execution["reason"]
    assert "carrier      an application of its own: static_conf sets spark.executor.memoryOverhead" in text


KILLED = """
def spins(spark):
    return spark.range(0, 10**13, 1, 2).selectExpr("sum(id % 7) AS s")

with DAG("warm_killed", schedule=None, start_date=START):
    Stage(task_id="spins", python_callable=spins)
"""


def _jobs(ui_url: str, application_id: str) -> list[dict[str, Any]]:
    with urllib.request.urlopen(f"{ui_url}/api/v1/applications/{application_id}/jobs", timeout=10) as response:
        jobs: list[dict[str, Any]] = json.loads(response.read())
    return jobs


def test_killing_a_warm_task_cancels_its_jobs_and_keeps_the_pool(warm_pool_folder: str, tmp_path: Path) -> None:
    from airflow_provider_finegrained import warm

    write_dag_file("warm_killed.py", HEADER + KILLED)
    pool = warm.ensure_started(embedded_settings())
    log = tmp_path / "task.log"
    task = start_task_test("warm_killed", "spins", log)
    try:
        deadline = time.monotonic() + 300
        while not any(j["status"] == "RUNNING" for j in _jobs(pool.ui_url, pool.application_id)):
            assert task.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the stage's Spark job never started"
            time.sleep(1)
        task.send_signal(signal.SIGTERM)
        task.wait(timeout=120)
    finally:
        if task.poll() is None:
            task.kill()
    text = log.read_text()
    assert "Task killed" in text, text[-3000:]
    deadline = time.monotonic() + 60
    while any(j["status"] == "RUNNING" for j in _jobs(pool.ui_url, pool.application_id)):
        assert time.monotonic() < deadline, "the killed stage's job is still running in the pool"
        time.sleep(1)
    # The pool itself is untouched and still serves.
    warm.check_pool(pool)
    assert warm.status(warm_pool_folder)["url"] == pool.url
    storage = Path(os.environ["AIRFLOW_HOME"]) / "finegrained" / "storage" / "warm_killed"
    assert not list(storage.glob("*/spins/try=*")), "a killed try must publish nothing"


def test_a_warm_task_killed_with_sigkill_has_its_job_stopped_by_the_pool(warm_pool_folder: str, tmp_path: Path) -> None:
    # The task cannot interrupt anything: the pool does (the ready driver's child sees the task hang up, the
    # supervisor sees its lease's holder die) and stops its session.
    from airflow_provider_finegrained import warm

    write_dag_file("warm_killed.py", HEADER + KILLED)
    pool = warm.ensure_started(embedded_settings())
    assert pool.ui_url and pool.application_id
    before = {job["jobId"] for job in _jobs(pool.ui_url, pool.application_id)}
    log = tmp_path / "task.log"
    task = start_task_test("warm_killed", "spins", log)
    try:
        deadline = time.monotonic() + 300
        while not [
            j for j in _jobs(pool.ui_url, pool.application_id) if j["status"] == "RUNNING" and j["jobId"] not in before
        ]:
            assert task.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the stage's Spark job never started"
            time.sleep(1)
        task.send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        task.wait(timeout=60)
    finally:
        if task.poll() is None:
            task.kill()
    while any(j["status"] == "RUNNING" for j in _jobs(pool.ui_url, pool.application_id)):
        assert time.monotonic() - killed_at < 15, "the SIGKILLed task's job is still running in the pool"
        time.sleep(0.5)
    # The ready driver's child stops the job as soon as the task hangs up; the supervisor's poll follows.
    supervisor_log = Path(warm_pool_folder) / "supervisor.log"
    expired = f"(pid {task.pid}) expired: its holder died"
    deadline = time.monotonic() + 15
    while expired not in supervisor_log.read_text():
        assert time.monotonic() < deadline, supervisor_log.read_text()[-2000:]
        time.sleep(0.5)
    warm.check_pool(pool)


ONE_STAGE = """
def numbers(spark):
    return spark.range(0, 100)

with DAG("warm_token_left", schedule=None, start_date=START):
    Stage(task_id="numbers", python_callable=numbers)
"""


def test_a_connect_token_left_in_the_environment_does_not_lock_the_region_out_of_its_pool(
    warm_pool_folder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # pyspark sets this when a process starts a local Connect server of its own (remote("local")); seen
    # by a client, it makes it speak TLS to our pool on 127.0.0.1, which never answers.
    monkeypatch.setenv("SPARK_CONNECT_AUTHENTICATE_TOKEN", "left-by-pyspark")
    _, states, results = run("warm_token_left", ONE_STAGE)
    assert states == {"numbers": "success"}, states
    assert results["numbers"]["trace"]["execution"]["mode"] == "warm"
    assert os.environ["SPARK_CONNECT_AUTHENTICATE_TOKEN"] == "left-by-pyspark"  # the process's own, restored
