"""The provider on a real YARN with an hdfs:// storage root: the session's loopback Hadoop cluster.

The cluster (tests/conftest.py's ``hadoop_cluster``) has a ResourceManager with two NodeManagers of 2 vcores
and 4 GiB, and HDFS with WebHDFS on; the connection is the one ``hadoop start`` prints
(``cli/hadoop.py``), with small test data.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_provider_finegrained.cli.hadoop import connection_extra
from airflow_provider_finegrained.cli.report import stage_results
from airflow_provider_finegrained.launchers.http import get_json
from airflow_provider_finegrained.spark.hadoop_cluster import HadoopCluster
from airflow_provider_finegrained.storage.filesystem import filesystem, write_bytes
from tests.conftest import REPO
from tests.e2e.conftest import install_dag_file, load_dag, write_dag_file
from tests.tpch import reference

pytestmark = [pytest.mark.slow, pytest.mark.hadoop]

AIRFLOW = str(Path(sys.executable).parent / "airflow")


def connection(cluster: HadoopCluster, *, shipped_python: bool = False, **extra: Any) -> str:
    """The connection ``hadoop start`` prints, with small test data; ``extra`` replaces settings, but its
    ``spark_conf`` is added to the connection's.

    Every NodeManager runs on this machine, so the containers may run this Python as it is; the packed
    environment ``python_env`` ships (``shipped_python``) is proven once, in test_yarn_python_env.py.
    """
    settings = connection_extra(cluster)
    spark_conf = dict(settings["spark_conf"])
    if not shipped_python:
        spark_conf["spark.pyspark.python"] = sys.executable
    if options := os.environ.get("JAVA_TOOL_OPTIONS"):
        # The containers' JVMs start as the suite's others do (tests/jvm_start.py): NodeManagers pass on
        # only the environment they are told to.
        spark_conf.update({f"spark.{side}.JAVA_TOOL_OPTIONS": options for side in ("executorEnv", "yarn.appMasterEnv")})
    spark_conf.update(extra.pop("spark_conf", {}))
    settings.update({"avg_bytes_per_task": "64k", "max_parallelism": 4, "capacity_poll_interval": 1, **extra})
    settings["spark_conf"] = spark_conf
    return json.dumps({"conn_type": "finegrained_spark", "host": "yarn", "extra": settings})


def applications(cluster: HadoopCluster, dag_id: str) -> list[dict[str, Any]]:
    """Every application the ResourceManager knows for ``dag_id`` (any state)."""
    answer = get_json(f"{cluster.resourcemanager_url}/ws/v1/cluster/apps", 10.0)
    return [a for a in ((answer.get("apps") or {}).get("app") or []) if a["name"].startswith(f"{dag_id}.")]


def read_output(cluster: HadoopCluster, path: str) -> Any:
    fs, inside = filesystem(path, {"webhdfs_url": cluster.namenode_http_url})
    return pq.read_table(inside, filesystem=fs)


@pytest.fixture
def on_yarn(hadoop_cluster: HadoopCluster, airflow_db: None, monkeypatch: pytest.MonkeyPatch) -> HadoopCluster:
    monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", connection(hadoop_cluster))
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)  # the connection's hadoop_conf_dir must be enough
    return hadoop_cluster


def test_tpch_pipeline_on_yarn_with_hdfs_answers_right_one_application_per_region(
    on_yarn: HadoopCluster, tpch_dir: Path
) -> None:
    cluster = on_yarn
    data = cluster.storage_root("/tpch/sf0.01")
    for table in tpch_dir.glob("*.parquet"):
        write_bytes(f"{data}/{table.name}", table.read_bytes(), {"webhdfs_url": cluster.namenode_http_url})
    for name in ("tpch_pipeline.py", "tpch_queries.py", "tpch_data.py"):
        install_dag_file(REPO / "dags_examples" / name)
    from tests.conftest import DAGS_FOLDER

    run = load_dag(DAGS_FOLDER / "tpch_pipeline.py", "tpch_pipeline").test(run_conf={"data_dir": data})
    assert run.state == "success", {ti.task_id: ti.state for ti in run.get_task_instances()}
    results = stage_results("tpch_pipeline", run.run_id)[1]
    reference.assert_same_answer(
        read_output(cluster, results["q1_pricing_summary"]["output"]["data_path"]),
        reference.q1(tpch_dir),
        keys=["l_returnflag", "l_linestatus"],
        atol=1e-6,
    )
    reference.assert_same_answer(
        read_output(cluster, results["q5_local_supplier_volume"]["output"]["data_path"]),
        reference.q5(tpch_dir),
        keys=["n_name"],
    )
    for result in results.values():
        trace = result["trace"]
        # Every written output is on HDFS (a pipelined handover has none).
        assert result["output"]["path"].startswith(cluster.storage_root()) or not result["output"]["path"]
        assert trace["application_id"].startswith("application_"), trace["application_id"]
        assert trace["capacity"]["source"].startswith("YARN"), trace["capacity"]
        # The client-mode driver on this worker maps the class-data archive; YARN's containers cannot
        # (docs/cold-start.md), and get the region's JIT alone: a small region here, so C1.
        assert trace["jvm"]["archive"] == {"driver": True, "executors": False}, trace["jvm"]
        assert (
            trace["jvm"]["jit"] == "c1"
            and "-XX:TieredStopAtLevel=1" in trace["spark_conf"]["spark.executor.extraJavaOptions"].split()
        )
    # The ResourceManager ran one application per region of this run, each to success; and one more, not
    # successful, for a region whose first SparkContext did not start (Spark's start race in client mode on
    # YARN, more likely on a loaded machine: the region is submitted once more, its trace says so).
    regions = {r["trace"]["region"] for r in results.values()}
    restarted = {r["trace"]["region"] for r in results.values() if r["trace"]["execution"].get("restarted")}
    apps = [a for a in applications(cluster, "tpch_pipeline") if run.run_id in a["name"]]
    assert len(apps) == len(regions) + len(restarted), [a["name"] for a in apps]
    succeeded = [a for a in apps if (a["state"], a["finalStatus"]) == ("FINISHED", "SUCCEEDED")]
    assert len(succeeded) == len(regions), apps
    assert {a["id"] for a in succeeded} == {r["trace"]["application_id"] for r in results.values()}


def test_cluster_deploy_mode_runs_the_driver_in_the_application_master(
    on_yarn: HadoopCluster, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    cluster = on_yarn
    monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", connection(cluster, deploy_mode="cluster"))
    install_dag_file(REPO / "dags_examples" / "hello_stages.py")
    from tests.conftest import DAGS_FOLDER

    run = load_dag(DAGS_FOLDER / "hello_stages.py", "hello_stages").test()
    assert run.state == "success", {ti.task_id: ti.state for ti in run.get_task_instances()}
    results = stage_results("hello_stages", run.run_id)[1]
    # The driver in the ApplicationMaster's container read its job from HDFS, wrote its statuses there and
    # committed the output that the Airflow side reads back over WebHDFS.
    assert read_output(cluster, results["squares"]["output"]["data_path"]).num_rows == 10_000
    apps = [a for a in applications(cluster, "hello_stages") if run.run_id in a["name"]]
    assert len(apps) == 2 and {a["finalStatus"] for a in apps} == {"SUCCEEDED"}, apps
    submits = [line for line in capfd.readouterr().out.splitlines() if "Submitting region" in line]
    assert len(submits) == 2 and all("--deploy-mode cluster" in line for line in submits), submits


KILLED = """
import time
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

def sleeps(spark):
    spark.range(2).repartition(2).foreachPartition(lambda rows: time.sleep(600))
    return spark.range(1)

with DAG("killed_on_yarn", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    Stage(task_id="sleeps", python_callable=sleeps, parallelism=2)
"""


@pytest.mark.parametrize("deploy_mode", ["client", "cluster"])
def test_killing_the_task_ends_the_yarn_application(
    on_yarn: HadoopCluster, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, deploy_mode: str
) -> None:
    cluster = on_yarn
    monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", connection(cluster, deploy_mode=deploy_mode))
    write_dag_file("killed_on_yarn.py", KILLED)
    before = {a["id"] for a in applications(cluster, "killed_on_yarn")}
    log = tmp_path / "task.log"
    with log.open("w") as out:
        task = subprocess.Popen([AIRFLOW, "tasks", "test", "killed_on_yarn", "sleeps"], stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + 300
        while not [
            a for a in applications(cluster, "killed_on_yarn") if a["id"] not in before and a["state"] == "RUNNING"
        ]:
            assert task.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, log.read_text()[-3000:]
            time.sleep(1)
        time.sleep(5)  # executors are asked for at the first job: let them start
        task.send_signal(signal.SIGTERM)
        task.wait(timeout=180)
    finally:
        if task.poll() is None:
            task.kill()
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        ours = [a for a in applications(cluster, "killed_on_yarn") if a["id"] not in before]
        if ours and all(a["state"] in ("FINISHED", "FAILED", "KILLED") for a in ours):
            break
        time.sleep(1)
    assert len(ours) == 1, ours
    assert ours[0]["state"] in ("FINISHED", "FAILED", "KILLED") and ours[0]["finalStatus"] != "SUCCEEDED", ours[0]
    metrics = get_json(f"{cluster.resourcemanager_url}/ws/v1/cluster/metrics", 10.0)["clusterMetrics"]
    assert metrics["containersAllocated"] == 0, metrics


FAILING = """
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

def breaks(spark):
    import sys
    print("the driver's last words: bad input in partition 3", file=sys.stderr, flush=True)
    sys.exit(3)  # the driver dies before it can write the stage's status

with DAG("failing_on_yarn", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    Stage(task_id="breaks", python_callable=breaks, parallelism=1)
"""


def test_a_failed_cluster_mode_driver_brings_its_stderr_into_the_task_log(
    on_yarn: HadoopCluster, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    cluster = on_yarn
    monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", connection(cluster, deploy_mode="cluster"))
    write_dag_file("failing_on_yarn.py", FAILING)
    from tests.conftest import DAGS_FOLDER

    run = load_dag(DAGS_FOLDER / "failing_on_yarn.py", "failing_on_yarn").test()
    assert run.state == "failed"
    out = "".join(capfd.readouterr())
    # From the ApplicationMaster's container on its NodeManager: no `yarn` command on the Airflow worker.
    assert "driver stderr (last 32 KiB, from its NodeManager):" in out
    assert "the driver's last words: bad input in partition 3" in out.split("driver stdout (last 32 KiB")[1]
    apps = [a for a in applications(cluster, "failing_on_yarn") if run.run_id in a["name"]]
    assert [a["finalStatus"] for a in apps] == ["FAILED"]
