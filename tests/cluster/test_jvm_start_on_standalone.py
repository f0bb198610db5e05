"""The JVMs a region starts on a loopback standalone cluster map the provider's class-data archive and run the
region's JIT (which JVM gets what, for every setting and master: tests/spark/test_jvm_start.py).

The suite's own ``JAVA_TOOL_OPTIONS`` (tests/jvm_start.py) would give every JVM the same archive and C1, so
this test takes them away from the driver and the executors: what the JVMs map here, the provider gave them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_provider_finegrained.cli.report import stage_results
from airflow_provider_finegrained.spark.class_archive import existing_archive
from airflow_provider_finegrained.spark.standalone import StandaloneCluster
from tests.cluster.test_pipeline_on_standalone import connection
from tests.e2e.conftest import load_dag, write_dag_file

pytestmark = pytest.mark.slow

SHARED = "source: shared objects file (top)"
"""How ``-Xlog:class+load`` names a class mapped from the (dynamic, top-layer) archive."""

DAG = """
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

def driver_arguments(spark):
    # Work on the executors, so they start; then the driver JVM's own arguments as the stage's output.
    assert spark.range(0, 1000, 1, 2).selectExpr("sum(id)").collect()[0][0] == 499500
    bean = spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    return spark.createDataFrame([(str(a),) for a in bean.getInputArguments()], "argument string")

with DAG("jvm_start", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    Stage(task_id="mapped", python_callable=driver_arguments, parallelism=2, finegrained_spark_conn_id="fg_mapped")
"""


def logged(stage: str, folder: Path) -> dict[str, str]:
    """The class-load logs of a stage's driver and executors: ``-Xlog`` to a file, after the provider's flags."""
    return {
        "spark.driver.extraJavaOptions": f"-Xlog:class+load=info:file={folder}/{stage}-driver.log",
        "spark.executor.extraJavaOptions": f"-Xlog:class+load=info:file={folder}/{stage}-executor-%p.log",
        "spark.executorEnv.JAVA_TOOL_OPTIONS": "-Dthe.suites.options=off",  # the Worker's would reach executors
    }


def test_region_jvms_map_the_archive_and_run_the_regions_jit(
    standalone_cluster: StandaloneCluster, airflow_db: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    archive = existing_archive()
    assert archive is not None, "scripts/test.sh makes the archive first (python -m tests.jvm_start)"
    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    conn = json.loads(connection(standalone_cluster, jit="c1"))
    conn["extra"]["spark_conf"].update(logged("mapped", tmp_path))
    monkeypatch.setenv("AIRFLOW_CONN_FG_MAPPED", json.dumps(conn))
    from tests.conftest import DAGS_FOLDER

    write_dag_file("jvm_start.py", DAG)
    run = load_dag(DAGS_FOLDER / "jvm_start.py", "jvm_start").test()
    assert run.state == "success", {ti.task_id: ti.state for ti in run.get_task_instances()}
    results = stage_results("jvm_start", run.run_id)[1]

    def arguments(stage: str) -> list[str]:
        return pq.read_table(results[stage]["output"]["path"]).column("argument").to_pylist()

    def mapped_lines(name: str) -> list[int]:
        logs = sorted(tmp_path.glob(name))
        assert logs, f"no class-load log {name} in {sorted(p.name for p in tmp_path.iterdir())}"
        return [sum(SHARED in line for line in log.read_text().splitlines()) for log in logs]

    # The provider's flags first, the user's own after them (a later JVM flag wins).
    mapped = arguments("mapped")
    assert f"-XX:SharedArchiveFile={archive}" in mapped and "-XX:TieredStopAtLevel=1" in mapped
    assert mapped.index(f"-XX:SharedArchiveFile={archive}") < next(
        i for i, a in enumerate(mapped) if a.startswith("-Xlog:class+load")
    )
    # What the JVMs did with them: thousands of Spark's classes mapped from the archive, by the driver and by
    # every executor.
    assert all(n > 1000 for n in mapped_lines("mapped-driver.log")), mapped_lines("mapped-driver.log")
    assert all(n > 1000 for n in mapped_lines("mapped-executor-*.log")), mapped_lines("mapped-executor-*.log")
    # The trace says it, as the task log and the run page show it.
    assert results["mapped"]["trace"]["jvm"] == {
        "jit": "c1",
        "reason": "jit=c1 set on the connection",
        "archive": {"driver": True, "executors": True},
    }
