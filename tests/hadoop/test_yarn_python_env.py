"""The Python environment travels by itself: YARN containers without pyspark on PATH run the Airflow worker's
environment, packed once per content digest and kept on the hdfs:// storage root (``python_env`` auto).
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from airflow_provider_finegrained.cli.report import stage_results
from airflow_provider_finegrained.python_env import environment_digest, ship_environment
from airflow_provider_finegrained.python_env.ship import ARCHIVE_FOLDER, cache_folder
from airflow_provider_finegrained.spark.hadoop_cluster import HadoopCluster
from airflow_provider_finegrained.storage.filesystem import list_files
from tests.e2e.conftest import load_dag, write_dag_file
from tests.hadoop.test_yarn import applications, connection, read_output

pytestmark = [pytest.mark.slow, pytest.mark.hadoop]

BARE_PATH = "/usr/bin:/bin"
"""The containers' PATH: the system's python3, which has no pyspark and no provider."""

WHERE = """
import sys
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

def where(spark):
    from pyspark.sql import functions as F, types as T

    prefix = F.udf(lambda _: sys.prefix, T.StringType())
    return spark.range(4).repartition(2).select(
        prefix("id").alias("executor_python"), F.lit(sys.prefix).alias("driver_python")
    )

with DAG("{dag_id}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    Stage(task_id="where", python_callable=where, parallelism=2)
"""


def bare_containers() -> dict[str, str]:
    return {f"spark.{side}.PATH": BARE_PATH for side in ("executorEnv", "yarn.appMasterEnv")}


def run_where(cluster: HadoopCluster, monkeypatch: pytest.MonkeyPatch, dag_id: str, **settings: object) -> object:
    conn = connection(cluster, shipped_python=True, spark_conf=bare_containers(), **settings)
    monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", conn)
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    from tests.conftest import DAGS_FOLDER

    write_dag_file(f"{dag_id}.py", WHERE.format(dag_id=dag_id))
    return load_dag(DAGS_FOLDER / f"{dag_id}.py", dag_id).test()


def test_the_containers_path_has_no_pyspark() -> None:
    # What makes the tests below prove something: the containers' own Python cannot run a region.
    found = subprocess.run(
        ["python3", "-c", "import pyspark"], env={"PATH": BARE_PATH}, capture_output=True, text=True, check=False
    )
    assert found.returncode != 0 and "No module named 'pyspark'" in found.stderr


@pytest.mark.parametrize("deploy_mode", ["cluster", "client"])
def test_containers_without_pyspark_run_the_shipped_environment(
    hadoop_cluster: HadoopCluster,
    airflow_db: None,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    deploy_mode: str,
) -> None:
    cluster = hadoop_cluster
    dag_id = f"python_env_{deploy_mode}"
    run = run_where(cluster, monkeypatch, dag_id, deploy_mode=deploy_mode)
    out = "".join(capfd.readouterr())
    assert run.state == "success", {ti.task_id: ti.state for ti in run.get_task_instances()}  # type: ignore[attr-defined]
    result = stage_results(dag_id, run.run_id)[1]["where"]  # type: ignore[attr-defined]
    rows = read_output(cluster, result["output"]["data_path"]).to_pylist()
    # Executors ran Python from the archive YARN unpacked as ./environment in their containers.
    assert rows and all(r["executor_python"].endswith("/environment") for r in rows), rows
    assert not any(r["executor_python"] == sys.prefix for r in rows)
    driver = {r["driver_python"] for r in rows}
    # The driver: in the ApplicationMaster's container in cluster mode, this Python in client mode.
    assert driver == ({sys.prefix} if deploy_mode == "client" else driver) and len(driver) == 1
    if deploy_mode == "cluster":
        assert driver.pop().endswith("/environment")

    digest = environment_digest()
    archive = f"{cluster.storage_root()}/{ARCHIVE_FOLDER}/{digest}.tar.gz"
    conf = result["trace"]["spark_conf"]
    # YARN's own list: every container localizes it, and a client-mode driver (on this machine, with this
    # Python) does not download and unpack it too, as it does with spark.archives.
    assert conf["spark.yarn.dist.archives"] == f"{archive}#environment" and "spark.archives" not in conf
    assert "Submitting region" in out and "Unpacking an archive" not in out
    assert conf["spark.pyspark.python"] == "./environment/bin/python"
    assert conf.get("spark.pyspark.driver.python") == (sys.executable if deploy_mode == "client" else None)
    kept = list_files(f"{cluster.storage_root()}/{ARCHIVE_FOLDER}", {"webhdfs_url": cluster.namenode_http_url})
    assert list(kept) == [f"{digest}.tar.gz"]  # once per digest, whatever the number of regions
    apps = [a for a in applications(cluster, dag_id) if run.run_id in a["name"]]  # type: ignore[attr-defined]
    assert [a["finalStatus"] for a in apps] == ["SUCCEEDED"]


def test_the_archive_leaves_out_pysparks_jars_and_carries_the_provider(tmp_path: Path) -> None:
    # Packed once per digest into this machine's cache (by the tests above, when they ran first).
    archive = ship_environment(str(tmp_path / "root"), None, cache_folder())
    assert archive == str(tmp_path / "root" / ARCHIVE_FOLDER / f"{environment_digest()}.tar.gz")
    with tarfile.open(archive) as tar:
        names = tar.getnames()
    site = f"lib/python{sys.version_info.major}.{sys.version_info.minor}/site-packages"
    assert "pyvenv.cfg" in names and "bin/python" in names
    assert f"{site}/pyspark/__init__.py" in names and f"{site}/airflow_provider_finegrained/runtime/driver.py" in names
    assert not any(n.startswith(f"{site}/pyspark/jars/") for n in names)
    assert not any("__editable__" in n for n in names)


def test_without_the_environment_the_cluster_mode_driver_cannot_start(
    hadoop_cluster: HadoopCluster, airflow_db: None, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    run = run_where(hadoop_cluster, monkeypatch, "python_env_off", deploy_mode="cluster", python_env="off")
    assert run.state == "failed"  # type: ignore[attr-defined]
    out = "".join(capfd.readouterr())
    assert "No module named 'airflow_provider_finegrained'" in out
