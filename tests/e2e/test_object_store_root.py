"""A storage root on an object store, end to end through Airflow: a real S3 API (moto) on loopback.

The Python side of a run (measuring external inputs, the region folder) reaches the store with the
credentials of ``storage_conn_id``; Spark's side cannot here (pyspark bundles no hadoop-aws and no
registry reachable from this machine has it), so the run must stop before any Spark work with an error
that names the package to add, and never print the store's secret.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.conftest import S3_BUCKET, S3_SECRET, s3_options
from tests.e2e.conftest import load_dag, write_dag_file

pytestmark = pytest.mark.slow

DAG_TEXT = """
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.dags.declaration import ExternalDataset
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

def count(spark, raw):
    return raw.groupBy("k").count()

with DAG("object_store_root", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    Stage(task_id="count", python_callable=count, inputs={{"raw": ExternalDataset("{raw}")}})
"""


def test_an_s3_root_uses_the_storage_connection_and_stops_before_spark_naming_hadoop_aws(
    airflow_db: None, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    import s3fs

    store = s3fs.S3FileSystem(**s3_options(moto_endpoint))
    raw = f"s3://{S3_BUCKET}/e2e/raw/part-0.parquet"
    with store.open(raw.removeprefix("s3://"), "wb") as handle:
        pq.write_table(pa.table({"k": [1, 2, 2, 3]}), handle)
    extra: dict[str, Any] = {"endpoint_url": moto_endpoint, "region_name": "eu-west-1"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_LAKE",
        json.dumps({"conn_type": "aws", "login": "moto-access-key", "password": S3_SECRET, "extra": extra}),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT",
        json.dumps(
            {
                "conn_type": "finegrained_spark",
                "host": "local[1]",
                "extra": {"storage_root": f"s3://{S3_BUCKET}/e2e/fg", "storage_conn_id": "lake", "warm_pool": "off"},
            }
        ),
    )
    path = write_dag_file("object_store_root.py", textwrap.dedent(DAG_TEXT.format(raw=raw)))
    run = load_dag(path, "object_store_root").test()
    assert {ti.task_id: ti.state for ti in run.get_task_instances()} == {"count": "failed"}
    captured = capfd.readouterr()
    text = captured.out + captured.err
    # Inputs are measured before the launcher is picked: this error means the S3 input was measured with
    # the connection's credentials (fsspec's defaults reach no store here); nothing was submitted.
    assert "region region-1 (stages count): storage_root 's3://finegrained-tests/e2e/fg'" in text
    assert "org.apache.hadoop:hadoop-aws:3.5.0" in text
    assert "Submitting region" not in text
    assert S3_SECRET not in text
