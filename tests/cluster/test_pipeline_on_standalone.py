"""The provider against a real standalone cluster: the TPC-H DAG, balance, parallel branches and faults.

The session's cluster (tests/cluster/conftest.py) has two workers of 2 cores and 4 GiB on 127.0.0.1.
The connection gives executors of 1 core and 1 GiB, so a region may hold up to four of them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import psutil
import pyarrow.parquet as pq
import pytest

from airflow_provider_finegrained.cli.report import stage_results
from airflow_provider_finegrained.spark.standalone import StandaloneCluster
from airflow_provider_finegrained.spark.standalone_start import start_local_cluster
from tests.conftest import REPO
from tests.e2e.conftest import install_dag_file, load_dag, write_dag_file
from tests.tpch import reference

pytestmark = pytest.mark.slow

AIRFLOW = str(Path(sys.executable).parent / "airflow")


SUPERVISOR_GRACE_S = 5.0
"""Seconds Airflow 3.3's supervisor waits after SIGTERM before it SIGKILLs a task it stopped (seen in task logs)."""


def connection(cluster: StandaloneCluster, **extra: Any) -> str:
    return json.dumps(
        {
            "conn_type": "finegrained_spark",
            "host": cluster.master_url,
            "extra": {
                "master_webui_url": cluster.webui_url,
                "total_cores": 4,
                "total_memory": "8g",
                "executor_cores": 1,
                "executor_memory": "1g",
                "driver_memory": "1g",
                "avg_bytes_per_task": "64k",
                "max_parallelism": 8,
                "capacity_poll_interval": 1,
                "spark_conf": {"spark.pyspark.python": sys.executable},
                **extra,
            },
        }
    )


@pytest.fixture
def on_cluster(
    standalone_cluster: StandaloneCluster, airflow_db: None, monkeypatch: pytest.MonkeyPatch
) -> StandaloneCluster:
    monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", connection(standalone_cluster))
    return standalone_cluster


def our_apps(cluster: StandaloneCluster, dag_id: str) -> list[dict[str, Any]]:
    return [a for a in cluster.status()["activeapps"] if a["name"].startswith(f"{dag_id}.")]


def executor_processes(cluster: StandaloneCluster) -> list[psutil.Process]:
    return [p for p in cluster.processes() if "CoarseGrainedExecutorBackend" in " ".join(p.cmdline())]


# -- the TPC-H example on the cluster, and how evenly its tasks spread ---------------------------------


def test_tpch_pipeline_on_the_cluster_answers_right_and_spreads_tasks_evenly(
    on_cluster: StandaloneCluster, tpch_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # AQE off: every shuffle runs the decided parallelism (AQE would coalesce this small data to a task or
    # two). At most 4 tasks: one wave on the 4 executors, where an even spread is Spark's to keep; over
    # several waves of millisecond tasks a warm executor takes more (see docs/cluster.md#balance-flip-370).
    # executors_from="start": every executor is asked for at the start and the first wave waits for all of
    # them (by default they come at the first job, and the first to register take these millisecond tasks).
    monkeypatch.setenv(
        "AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT",
        connection(on_cluster, adaptive_query_execution=False, max_parallelism=4, executors_from="start"),
    )
    for name in ("tpch_pipeline.py", "tpch_queries.py", "tpch_data.py"):
        install_dag_file(REPO / "dags_examples" / name)
    from tests.conftest import DAGS_FOLDER

    run = load_dag(DAGS_FOLDER / "tpch_pipeline.py", "tpch_pipeline").test(run_conf={"data_dir": str(tpch_dir)})
    assert run.state == "success", {ti.task_id: ti.state for ti in run.get_task_instances()}
    results = stage_results("tpch_pipeline", run.run_id)[1]
    reference.assert_same_answer(
        pq.read_table(results["q1_pricing_summary"]["output"]["path"]),
        reference.q1(tpch_dir),
        keys=["l_returnflag", "l_linestatus"],
        atol=1e-6,
    )
    reference.assert_same_answer(
        pq.read_table(results["q5_local_supplier_volume"]["output"]["path"]), reference.q5(tpch_dir), keys=["n_name"]
    )
    spreads = {}
    for stage, result in results.items():
        trace = result["trace"]
        assert trace["application_id"].startswith("app-"), trace["application_id"]  # a standalone application
        assert trace["capacity"]["source"].startswith(f"standalone master {on_cluster.webui_url}")
        tasks = trace["spark_tasks"]
        # FLIP-370 at the worker level: the master spreads a region's executors over both workers.
        per_worker = Counter(tasks["executor_workers"].values())
        assert len(tasks["executors"]) == trace["executors"]
        if trace["executors"] >= 2:
            assert len(per_worker) == 2 and max(per_worker.values()) - min(per_worker.values()) <= 1, per_worker
        # ... and at the executor level: no executor ran more than one task more than another.
        for spark_stage in tasks["spark_stages"]:
            if spark_stage["status"] != "COMPLETE":
                continue
            counts = [spark_stage["per_executor"].get(e, 0) for e in tasks["executors"]]
            spreads[(stage, spark_stage["stage_id"])] = (spark_stage["tasks"], counts)
            assert max(counts) - min(counts) <= 1, (stage, spark_stage, tasks["executors"])
    assert sum(tasks == 4 for tasks, _ in spreads.values()) >= 5, spreads  # shuffles of 4 tasks on 4 executors
    print("tasks per executor:", json.dumps({f"{k[0]}#{k[1]}": v for k, v in spreads.items()}))


# -- parallel branches of one DAG do not oversubscribe the cluster, under either admission ------------

BRANCHES = """
import os, time, pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage


def busy(spark, seconds, release=None):
    def hold(rows):
        # At most `seconds`; the left branch's tasks end as soon as the test has seen what it waits for.
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not (release and os.path.exists(release)):
            time.sleep(0.2)

    # Four tasks that each hold an executor: the region asks for all four at this, its first job.
    spark.sparkContext.parallelize(range(4), 4).foreachPartition(hold)
    return spark.range(0, 4000, 1, 4)


with DAG("two_branches", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    Stage(task_id="left", python_callable=busy, op_kwargs={"seconds": 240, "release": "{release}"}, parallelism=4)
    Stage(task_id="right", python_callable=busy, op_kwargs={"seconds": 1}, parallelism=4)
    Stage(
        task_id="queued",
        python_callable=busy,
        op_kwargs={"seconds": 1},
        parallelism=4,
        finegrained_spark_conn_id="finegrained_spark_queue",
    )
"""

App = tuple[str, str, int]
"""(application id, state, cores granted) as the master lists one of ours."""


def tasks_test(task: str, run_id: str, log: Path) -> subprocess.Popen[bytes]:
    with log.open("w") as out:
        return subprocess.Popen(
            [AIRFLOW, "tasks", "test", "two_branches", task, run_id],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=os.environ.copy(),
            start_new_session=True,
        )


def run_branches(
    cluster: StandaloneCluster, tmp_path: Path, run_id: str
) -> tuple[dict[str, str], list[frozenset[App]]]:
    """Run the left branch until it holds the whole cluster, then the other two at once, and let the left one
    go once the right one deferred and the master listed the queued one waiting beside it; their logs, and
    what the master listed meanwhile, every half second."""
    release = tmp_path / "release-left"
    write_dag_file("two_branches.py", textwrap.dedent(BRANCHES).replace("{release}", str(release)))
    # One DAG run the branches belong to, created up front: `tasks test` deletes a run it created itself.
    for command in (["dags", "reserialize"], ["dags", "trigger", "two_branches", "--run-id", run_id]):
        subprocess.run([AIRFLOW, *command], check=True, capture_output=True, env=os.environ.copy(), timeout=300)
    seen: list[frozenset[App]] = []
    stop = threading.Event()

    def listed() -> frozenset[App]:
        apps = our_apps(cluster, "two_branches")
        return frozenset((a["id"], a["state"], a["cores"]) for a in apps)

    def watch_master() -> None:
        while not stop.is_set():
            seen.append(listed())
            time.sleep(0.5)

    watcher = threading.Thread(target=watch_master, daemon=True)
    logs = {task: tmp_path / f"{task}.log" for task in ("left", "right", "queued")}
    running = {"left": tasks_test("left", run_id, logs["left"])}
    try:
        # The left region holds the cluster: its application registered (WAITING, no executor before its
        # first job) and then got all four cores for its four tasks.
        deadline = time.monotonic() + 240
        while not any(app[2] == 4 for app in listed()):
            assert running["left"].poll() is None, logs["left"].read_text()[-3000:]
            assert time.monotonic() < deadline, (listed(), logs["left"].read_text()[-3000:])
            time.sleep(0.5)
        watcher.start()
        running |= {task: tasks_test(task, run_id, logs[task]) for task in ("right", "queued")}
        # What the left branch holds the cluster for (its tasks end after 240 s whatever happens): the right
        # one deferred, and the master listed the queued one with no core beside the left one's four.
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not (
            "Deferring until capacity frees" in logs["right"].read_text()
            and any(sorted(cores for _, _, cores in apps) == [0, 4] for apps in list(seen))
        ):
            for task, process in running.items():
                assert process.poll() is None, (task, logs[task].read_text()[-3000:])
            time.sleep(0.5)
        release.touch()
        for task, process in running.items():
            assert process.wait(timeout=300) == 0, (task, logs[task].read_text()[-3000:])
    finally:
        stop.set()
        for process in running.values():
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
    watcher.join(timeout=5)
    return {task: log.read_text() for task, log in logs.items()}, seen


def test_parallel_branches_asking_for_more_than_the_cluster_take_turns_under_either_admission(
    on_cluster: StandaloneCluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_QUEUE", connection(on_cluster, admission="cluster_queue"))
    logs, seen = run_branches(on_cluster, tmp_path, "branches-1")
    traces = {task: result["trace"] for task, result in stage_results("two_branches", "branches-1")[1].items()}
    task_of = {trace["application_id"]: task for task, trace in traces.items()}
    listings = [{task_of.get(app_id, app_id): (state, cores) for app_id, state, cores in apps} for apps in seen]
    # Each asked for four 1-core executors; the cluster has four cores, and the left one held them all.
    assert "running as planned: 4 executor(s) of 1 core(s)" in logs["left"]
    # fit_now (right): it waited its turn in a deferred task instead of registering an application that
    # would sit without executors: the master never listed its application next to another.
    assert "Deferring until capacity frees" in logs["right"]
    assert "not enough free resources: asked for 4 executor(s) of 1 core(s)" in logs["right"]
    assert "as_requested after waiting" in logs["right"]
    assert traces["right"]["capacity"]["outcome"] == "as_requested after waiting"
    assert any("right" in apps for apps in listings), listings
    assert all(len(apps) == 1 for apps in listings if "right" in apps), listings
    # cluster_queue (queued): neither smaller nor deferred. It asked for all four while none was free,
    # registered, and the master listed it waiting with no core next to the left one holding all four, then
    # granted it cores.
    assert "asking the cluster manager for 4 executor(s) of 1 core(s), 1.0 GiB, 0 of them free now" in logs["queued"]
    assert "Deferring" not in logs["queued"]
    assert traces["queued"]["capacity"]["outcome"] == "queued"
    assert any({task: cores for task, (_, cores) in apps.items()} == {"left": 4, "queued": 0} for apps in listings), (
        listings
    )
    assert max(apps["queued"][1] for apps in listings if "queued" in apps) > 0, listings


# -- faults ------------------------------------------------------------------------------------------

ONE_STAGE = """
import time, pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.planning import ResourceSpec
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage


def slow_rows(spark):
    def slow(x):
        time.sleep(1.5)
        return (x, x * x)

    return spark.sparkContext.parallelize(range(16), 8).map(slow).toDF(["n", "square"])


def huge(spark):
    return spark.range(1)


with DAG("{dag_id}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), default_args={default_args}):
    {stage}
"""


def one_stage_dag(dag_id: str, stage: str, default_args: str = "{}") -> Any:
    text = ONE_STAGE.format(dag_id=dag_id, stage=stage, default_args=default_args)
    return load_dag(write_dag_file(f"{dag_id}.py", textwrap.dedent(text)), dag_id)


def test_a_worker_lost_mid_stage_is_rescheduled_and_the_output_published_once(
    airflow_db: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = start_local_cluster(str(tmp_path / "cluster"), workers=2, cores_per_worker=2, memory_per_worker="4g")
    try:
        monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", connection(cluster))
        dag = one_stage_dag("worker_lost", 'Stage(task_id="slow_rows", python_callable=slow_rows, parallelism=4)')
        killed = threading.Event()

        def kill_a_worker_once_tasks_run() -> None:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                if len(executor_processes(cluster)) == 4:
                    time.sleep(4)  # the first wave of tasks is running on all executors
                    cluster.kill_worker(0)
                    killed.set()
                    return
                time.sleep(0.3)

        killer = threading.Thread(target=kill_a_worker_once_tasks_run, daemon=True)
        killer.start()
        run = dag.test()
        killer.join(timeout=10)
        assert killed.is_set(), "the worker was never killed: the test proved nothing"
        assert run.state == "success"
        result = stage_results("worker_lost", run.run_id)[1]["slow_rows"]
        table = pq.read_table(result["output"]["path"])
        assert sorted(table.column("n").to_pylist()) == list(range(16))  # every row once: no lost, no doubled
        folder = Path(result["output"]["path"]).parent
        # No leftovers: the committed try and the stage's fence (its tokens), nothing else.
        assert sorted(p.name for p in folder.iterdir()) == sorted(["_fence", Path(result["output"]["path"]).name])
    finally:
        cluster.stop()
    assert cluster.processes() == []


def test_an_unreachable_master_fails_clearly_before_submitting_and_is_retried(
    airflow_db: None, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    gone = StandaloneCluster("/nonexistent", "spark://127.0.0.1:9", "http://127.0.0.1:9", 0, (), ())
    monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", connection(gone))
    dag = one_stage_dag(
        "master_down",
        'Stage(task_id="huge", python_callable=huge)',
        default_args='{"retries": 1, "retry_delay": 0}',
    )
    run = dag.test()
    (ti,) = run.get_task_instances()
    assert (run.state, ti.state, ti.try_number) == ("failed", "failed", 2)  # Airflow retried it once
    text = "".join(capfd.readouterr())
    assert text.count("cannot read the free capacity of spark://127.0.0.1:9") == 2
    assert "http://127.0.0.1:9/json/" in text
    assert "Submitting region" not in text


def test_an_executor_larger_than_any_worker_fails_before_submitting(
    on_cluster: StandaloneCluster, capfd: pytest.CaptureFixture[str]
) -> None:
    dag = one_stage_dag(
        "too_big",
        'Stage(task_id="huge", python_callable=huge, resources=ResourceSpec(cpu_cores=1, heap_memory="6g"))',
        default_args='{"retries": 2, "retry_delay": 0}',
    )
    started = time.monotonic()
    run = dag.test()
    (ti,) = run.get_task_instances()
    assert (run.state, ti.state, ti.try_number) == ("failed", "failed", 1)  # retrying cannot help: not retried
    assert time.monotonic() - started < 120
    text = "".join(capfd.readouterr())
    assert "region region-1 (stages huge): no worker can ever hold one executor of 1 core(s), 6.3 GiB" in text
    assert "the largest has 2 cores, 4.0 GiB" in text
    assert "Submitting region" not in text
    assert our_apps(on_cluster, "too_big") == []


KILLED = """
import time, pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

def sleeps(spark):
    spark.range(0, 100, 1, 2).count()
    time.sleep(600)
    return spark.range(1)

with DAG("killed_on_cluster", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    Stage(task_id="sleeps", python_callable=sleeps, parallelism=2)
"""


def driver_processes(cluster: StandaloneCluster) -> list[psutil.Process]:
    return [p for p in cluster.processes() if "DriverWrapper" in " ".join(p.cmdline())]


@pytest.mark.parametrize("deploy_mode", ["client", "cluster"])
def test_killing_the_task_removes_the_application_from_the_cluster(
    standalone_cluster: StandaloneCluster,
    airflow_db: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    deploy_mode: str,
) -> None:
    cluster = standalone_cluster
    monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", connection(cluster, deploy_mode=deploy_mode))
    write_dag_file("killed_on_cluster.py", KILLED)
    drivers_before = {d["id"] for d in cluster.status()["completeddrivers"]}
    log = tmp_path / "task.log"
    with log.open("w") as out:
        task = subprocess.Popen(
            [AIRFLOW, "tasks", "test", "killed_on_cluster", "sleeps"], stdout=out, stderr=subprocess.STDOUT
        )
    try:
        deadline = time.monotonic() + 240
        while not (our_apps(cluster, "killed_on_cluster") and executor_processes(cluster)):
            assert task.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(1)
        if deploy_mode == "cluster":
            assert driver_processes(cluster), "in cluster mode the driver runs under a worker"
            assert [d["state"] for d in cluster.status()["activedrivers"]] == ["RUNNING"]
        task.send_signal(signal.SIGTERM)
        if deploy_mode == "cluster":
            # As Airflow's supervisor stops a task (a run marked failed, a superseded try): SIGKILL 5 s after SIGTERM.
            with contextlib.suppress(subprocess.TimeoutExpired):
                task.wait(timeout=SUPERVISOR_GRACE_S)
            task.kill()
        task.wait(timeout=180)
    finally:
        if task.poll() is None:
            task.kill()
    from airflow_provider_finegrained.execution.capacity_gate import capacity_source
    from airflow_provider_finegrained.hooks import FineGrainedSparkHook

    ledger = capacity_source(FineGrainedSparkHook().get_settings()).ledger()
    assert ledger is not None and ledger.local
    # Released by the kill itself, first: read the files, not the live view, which drops a dead holder's
    # reservation here but keeps another host's for 15 minutes.
    assert [f.name for f in ledger.folder.glob("*") if "killed_on_cluster" in f.read_text(errors="replace")] == []
    deadline = time.monotonic() + 60

    def left() -> bool:  # the driver's JVM may outlive its application by a moment while it exits
        return bool(our_apps(cluster, "killed_on_cluster") or executor_processes(cluster) or driver_processes(cluster))

    while left() and time.monotonic() < deadline:
        time.sleep(1)
    assert our_apps(cluster, "killed_on_cluster") == []
    assert executor_processes(cluster) == []
    assert driver_processes(cluster) == []
    assert cluster.status()["activedrivers"] == []
    if deploy_mode == "cluster":
        # The task died before it could log how the kill ended; the master says.
        assert "Task killed: stopping the Spark application" in log.read_text()
        ended = [d["state"] for d in cluster.status()["completeddrivers"] if d["id"] not in drivers_before]
        assert ended == ["KILLED"]


def test_cluster_deploy_mode_runs_the_region_driver_on_a_worker(
    standalone_cluster: StandaloneCluster,
    airflow_db: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
) -> None:
    cluster = standalone_cluster
    # The storage root as a file:// URI: what a driver on a worker reads its job from and commits to.
    root = tmp_path / "uri-root"
    monkeypatch.setenv(
        "AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT",
        connection(cluster, deploy_mode="cluster", storage_root=f"file://{root}"),
    )
    install_dag_file(REPO / "dags_examples" / "hello_stages.py")
    from tests.conftest import DAGS_FOLDER

    before = {d["id"] for d in cluster.status()["completeddrivers"]}
    run = load_dag(DAGS_FOLDER / "hello_stages.py", "hello_stages").test()
    assert run.state == "success"
    results = stage_results("hello_stages", run.run_id)[1]
    output = results["squares"]["output"]
    assert output["path"].startswith(str(root)) and output["data_path"].startswith(output["path"] + "/attempt-")
    assert pq.read_table(output["data_path"]).num_rows == 10_000
    assert all(r["trace"]["application_id"].startswith("app-") for r in results.values())
    drivers = [d for d in cluster.status()["completeddrivers"] if d["id"] not in before]
    assert len(drivers) == 2 and {d["state"] for d in drivers} == {"FINISHED"}  # one driver per region
    # What the worker's driver starts from and reads came through the storage root, not from the
    # Airflow worker's installation: the primary jar, PythonRunner's program, the region driver, its job.
    submits = [line for line in capfd.readouterr().out.splitlines() if "Submitting region" in line]
    assert len(submits) == 2
    for line in submits:
        words = line.split()
        jar = max(i for i, word in enumerate(words) if word.endswith(".jar"))
        run = words.index("run", jar)
        shipped = [words[jar], words[jar + 1], words[run + 1], words[run + 2]]
        assert all(word.startswith(f"{root}/hello_stages/") for word in shipped), shipped


def test_a_region_runs_smaller_when_only_part_of_its_request_is_free(
    on_cluster: StandaloneCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two of the four cores are held by another region (in the ledger): a stage asking for four runs on two."""
    from airflow_provider_finegrained.capacity import Reservation, ReservationLedger
    from airflow_provider_finegrained.execution.capacity_gate import capacity_source
    from airflow_provider_finegrained.hooks import FineGrainedSparkHook

    folder = capacity_source(FineGrainedSparkHook().get_settings()).ledger_folder
    assert folder is not None
    holder = subprocess.Popen(["sleep", "600"])
    key = "other-dag/run/region-9/try=1"
    with ReservationLedger(folder).locked() as view:
        view.add(
            Reservation(key=key, app_name="other", executors=2, executor_cores=1, executor_memory=2**30, pid=holder.pid)
        )
    try:
        dag = one_stage_dag("runs_smaller", 'Stage(task_id="huge", python_callable=huge, parallelism=4)')
        run = dag.test()
    finally:
        ReservationLedger(folder).release(key)
        holder.kill()
        holder.wait()
    assert run.state == "success"
    trace = stage_results("runs_smaller", run.run_id)[1]["huge"]["trace"]
    assert trace["capacity"]["outcome"] == "reduced"
    assert "asked for 4 executor(s) of 1 core(s), 1.0 GiB, 2 fit" in trace["capacity"]["message"]
    assert trace["capacity"]["message"].endswith("sized again on 2 executor(s), 2 wave(s) for this stage")
    assert (trace["parallelism"], trace["waves"]) == (4, 2)
    # What reaches Spark: at most the two granted executors (asked for at the first job; the one-row stage
    # may need only one of them).
    assert trace["executors"] == 2 >= len(trace["spark_tasks"]["executors"]) >= 1
    assert trace["spark_conf"]["spark.dynamicAllocation.maxExecutors"] == "2"
    assert trace["spark_conf"]["spark.cores.max"] == "2"
