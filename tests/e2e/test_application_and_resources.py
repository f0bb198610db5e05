"""An application-file stage and declared ResourceSpecs, end to end on local Spark."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from airflow_provider_finegrained.cli.report import stage_results
from tests.e2e.conftest import load_dag, write_dag_file

pytestmark = pytest.mark.slow

APP = """
from airflow_provider_finegrained.runtime.api import current_stage

stage = current_stage()
threshold = int(stage.args[0])
stage.publish(stage.inputs["rows"].where(f"id >= {threshold}"))
"""

DAG = """
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

SPEC = {{"cpu_cores": 1, "heap_memory": "512m", "managed_memory": "256m"}}

def numbers(spark):
    return spark.range(1000)

with DAG("app_and_resources", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
         params={{"threshold": 900}}):
    rows = Stage(task_id="numbers", python_callable=numbers, resources=SPEC)
    Stage(task_id="filtered", application={app!r}, application_args=["{{{{ params.threshold }}}}"],
          inputs={{"rows": rows}}, resources=SPEC,
          spark_conf={{"spark.hadoop.fs.s3a.secret.key": "hunter2-not-for-logs"}})
"""


@pytest.mark.security
def test_application_file_with_resource_specs(
    airflow_db: None, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    app = tmp_path / "filter_app.py"
    app.write_text(APP)
    path = write_dag_file("app_and_resources.py", DAG.format(app=str(app)))
    run = load_dag(path, "app_and_resources").test()
    assert run.state == "success"
    _, results = stage_results("app_and_resources", run.run_id)
    filtered = results["filtered"]
    assert filtered["output"]["rows"] == 100  # the templated argument reached the application
    assert pq.read_table(filtered["output"]["path"]).column("id").to_pylist() == list(range(900, 1000))
    trace = filtered["trace"]
    # One slot = one task of the stage: 1 cpu, 512m heap + 256m managed. Local mode, 2 cores = 2 slots:
    # driver memory 2 * 768m + 300m reserved = 1836m; spark.memory.fraction = 256 / 768.
    assert trace["executor_memory"] == 1836 * 2**20
    assert round(trace["spark_memory_fraction"], 3) == 0.333
    assert trace["memory_fraction"] == 1.0  # alone in its region
    # A secret in Spark conf reaches Spark but neither XCom nor the task log.
    assert trace["spark_conf"]["spark.hadoop.fs.s3a.secret.key"] == "***"
    assert trace["spark_conf"]["spark.driver.memory"] == "1836m"
    assert "hunter2-not-for-logs" not in json.dumps(results)
    assert "hunter2-not-for-logs" not in "".join(capfd.readouterr())
