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
READ = "source: file:"
"""How it names a class read from a jar or a folder on the class path (not mapped)."""

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

    def loaded(name: str) -> list[tuple[int, int]]:
        """Per JVM: classes mapped from the provider's archive, and classes read from a jar or a folder."""
        logs = sorted(tmp_path.glob(name))
        assert logs, f"no class-load log {name} in {sorted(p.name for p in tmp_path.iterdir())}"
        counts = []
        for log in logs:
            lines = log.read_text().splitlines()
            counts.append((sum(SHARED in line for line in lines), sum(READ in line for line in lines)))
        return counts

    # The provider's flags first, the user's own after them (a later JVM flag wins).
    mapped = arguments("mapped")
    assert f"-XX:SharedArchiveFile={archive}" in mapped and "-XX:TieredStopAtLevel=1" in mapped
    assert mapped.index(f"-XX:SharedArchiveFile={archive}") < next(
        i for i, a in enumerate(mapped) if a.startswith("-Xlog:class+load")
    )
    # What the JVMs did with them: the driver mapped thousands of Spark's classes from the archive, and every
    # executor most of the classes it loaded. (An executor asked for while the job waits may get no task, and
    # so loads fewer classes: a count alone would depend on who won the race for the two tasks.)
    driver = loaded("mapped-driver.log")
    assert all(mapped > 1000 for mapped, _ in driver), driver
    executors = loaded("mapped-executor-*.log")
    assert all(mapped > 4 * read for mapped, read in executors), executors
    assert max(mapped for mapped, _ in executors) > 1000, executors
    # The trace says it, as the task log and the run page show it.
    assert results["mapped"]["trace"]["jvm"] == {
        "jit": "c1",
        "reason": "jit=c1 set on the connection",
        "archive": {"driver": True, "executors": True},
    }
