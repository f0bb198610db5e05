"""A storage root on an object store, end to end through Airflow: local Spark writes ``s3a://`` to a real S3 API.

moto runs in server mode on 127.0.0.1 (``moto_endpoint``); an ``aws`` connection (``storage_conn_id``)
holds its keys, endpoint and region. The Python side (measuring the S3 input, the region folder, the
commit marker written by the driver) uses the connection's fsspec options; Spark's side gets the same
credentials as ``spark.hadoop.fs.s3a.*`` and hadoop-aws through ``spark.jars`` (``s3a_jars``, resolved
from Maven Central once per session). Without those jars the run stops before any Spark work, naming
the package to add.
"""

from __future__ import annotations

import json
import textwrap
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import requests

from airflow_provider_finegrained.cli.report import stage_results
from airflow_provider_finegrained.runtime.output import MARKER, OutputAlreadyExistsError, read_committed
from airflow_provider_finegrained.runtime.output_commit import commit_output
from airflow_provider_finegrained.storage import filesystem
from tests.conftest import S3_BUCKET, S3_SECRET, s3_options
from tests.e2e.conftest import load_dag, write_dag_file

pytestmark = pytest.mark.slow

DAG_ID = "object_store_root"
ACCESS_KEY = "moto-access-key"

DAG_TEXT = """
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.dags.declaration import ExternalDataset
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

def count(spark, raw):
    return raw.groupBy("k").count()

with DAG("{dag_id}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    Stage(task_id="count", python_callable=count, inputs={{"raw": ExternalDataset("{raw}")}})
"""


def _s3_run_setup(moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, prefix: str, spark_conf: dict[str, str]) -> Path:
    """An S3 input under ``prefix``, the ``lake`` connection, the embedded default on an s3:// root; the DAG file."""
    import s3fs

    store = s3fs.S3FileSystem(**s3_options(moto_endpoint))
    raw = f"s3://{S3_BUCKET}/{prefix}/raw/part-0.parquet"
    with store.open(raw.removeprefix("s3://"), "wb") as handle:
        pq.write_table(pa.table({"k": [1, 2, 2, 3, 3, 3]}), handle)
    # The store by host name, as a MinIO or a proxy is reached: S3A addresses a host-name endpoint
    # virtual-host style (bucket.localhost) unless told otherwise, where botocore uses the path.
    endpoint = moto_endpoint.replace("//127.0.0.1:", "//localhost:")
    extra: dict[str, Any] = {"endpoint_url": endpoint, "region_name": "eu-west-1"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_LAKE",
        json.dumps({"conn_type": "aws", "login": ACCESS_KEY, "password": S3_SECRET, "extra": extra}),
    )
    monkeypatch.setenv(
        "AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT",
        json.dumps(
            {
                "conn_type": "finegrained_spark",
                "host": "local[1]",
                "extra": {
                    "storage_root": f"s3://{S3_BUCKET}/{prefix}/fg",
                    "storage_conn_id": "lake",
                    "warm_pool": "off",
                    "spark_conf": spark_conf,
                },
            }
        ),
    )
    return write_dag_file(f"{DAG_ID}.py", textwrap.dedent(DAG_TEXT.format(dag_id=DAG_ID, raw=raw)))


def _run_values(dag_id: str, run_id: str) -> tuple[list[Any], list[Any]]:
    """Every XCom value and every task's rendered fields of one DAG run."""
    from airflow.models.renderedtifields import RenderedTaskInstanceFields
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        xcoms = session.scalars(select(XComModel).where(XComModel.dag_id == dag_id, XComModel.run_id == run_id))
        values = [XComModel.deserialize_value(row) for row in xcoms]
        rendered = session.scalars(
            select(RenderedTaskInstanceFields).where(
                RenderedTaskInstanceFields.dag_id == dag_id, RenderedTaskInstanceFields.run_id == run_id
            )
        )
        return values, [row.rendered_fields for row in rendered]


def _read_parquet(uri: str, options: dict[str, Any]) -> pa.Table:
    with filesystem.open_file(uri, "rb", options) as handle:
        return pq.read_table(handle)


def _recorded_puts(moto_endpoint: str, key_suffix: str) -> list[dict[str, str]]:
    """The headers of the PUT requests moto recorded for keys ending in ``key_suffix``."""
    text = requests.get(f"{moto_endpoint}/moto-api/recorder/download-recording", timeout=30).text
    entries = [json.loads(line) for line in text.splitlines() if line.strip()]
    return [
        {name.lower(): value for name, value in entry["headers"].items()}
        for entry in entries
        if entry["method"] == "PUT" and unquote(urlsplit(entry["url"]).path).endswith(key_suffix)
    ]


def test_spark_writes_an_s3_root_through_s3a_and_commits_with_a_conditional_create(
    airflow_db: None,
    moto_endpoint: str,
    s3a_jars: list[str],
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    import moto.moto_api

    from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook

    path = _s3_run_setup(moto_endpoint, monkeypatch, "e2e-s3a", {"spark.jars": ",".join(s3a_jars)})
    # moto records every request with its headers (to a file of the test's own, not the working directory).
    monkeypatch.setattr(moto.moto_api.recorder, "_location", str(tmp_path / "moto-recording.jsonl"))
    requests.post(f"{moto_endpoint}/moto-api/recorder/reset-recording", timeout=30).raise_for_status()
    requests.post(f"{moto_endpoint}/moto-api/recorder/start-recording", timeout=30).raise_for_status()
    started = time.monotonic()
    try:
        run = load_dag(path, DAG_ID).test()
    finally:
        requests.post(f"{moto_endpoint}/moto-api/recorder/stop-recording", timeout=30).raise_for_status()
    captured = capfd.readouterr()
    text = captured.out + captured.err
    print(f"s3a run: {time.monotonic() - started:.1f} s")
    assert {ti.task_id: ti.state for ti in run.get_task_instances()} == {"count": "success"}, text[-3000:]

    # The stage's output is committed on S3: read back through the storage layer with the connection's options.
    options = FineGrainedSparkHook().storage_options()
    assert options["secret"] == S3_SECRET and options["client_kwargs"]["endpoint_url"].endswith(
        moto_endpoint.rsplit(":", 1)[1]
    )
    _, results = stage_results(DAG_ID, run.run_id)
    record = results["count"]["output"]
    location = record["path"]
    assert location.startswith(f"s3://{S3_BUCKET}/e2e-s3a/fg/{DAG_ID}/")
    committed = read_committed(location, storage_options=options)
    assert committed.rows == record["rows"] == 3
    table = pa.concat_tables(_read_parquet(uri, options) for uri in committed.uris)
    assert sorted(zip(table.column("k").to_pylist(), table.column("count").to_pylist(), strict=True)) == [
        (1, 1),
        (2, 2),
        (3, 3),
    ]

    # The driver created the marker with S3's conditional create (If-None-Match: *), signed with the
    # connection's key; Spark's own part files went up through S3A.
    marker_puts = _recorded_puts(moto_endpoint, f"{location.removeprefix('s3://').split('/', 1)[1]}/{MARKER}")
    assert len(marker_puts) == 1 and marker_puts[0].get("if-none-match") == "*", marker_puts
    assert ACCESS_KEY in marker_puts[0]["authorization"]
    part_puts = [h for h in _recorded_puts(moto_endpoint, ".parquet") if "hadoop" in h.get("user-agent", "").lower()]
    assert part_puts, "no parquet part was written by Hadoop's S3A client"

    # A second commit of the same location, past the writer's own marker check, is refused by the store.
    staging = f"{location}/attempt-second"
    with filesystem.open_file(f"{staging}/part-00000.parquet", "wb", options) as handle:
        pq.write_table(pa.table({"k": [9], "count": [9]}), handle)
    with pytest.raises(OutputAlreadyExistsError, match="committed by another writer meanwhile"):
        commit_output(staging, location, storage_options=options)
    assert read_committed(location, storage_options=options).attempt == committed.attempt

    # The secret appears nowhere: task log, submitted command line, XCom values, rendered fields.
    submits = [line for line in text.splitlines() if "Submitting region" in line]
    assert len(submits) == 1, text[-3000:]
    assert "--properties-file" in submits[0] and "spark.hadoop.fs.s3a.secret.key" not in submits[0]
    assert f"spark.hadoop.fs.s3a.access.key={ACCESS_KEY}" not in submits[0]
    assert S3_SECRET not in text
    xcoms, rendered = _run_values(DAG_ID, run.run_id)
    assert xcoms and rendered
    assert S3_SECRET not in json.dumps(xcoms, default=str)
    assert S3_SECRET not in json.dumps(rendered, default=str)


def test_without_hadoop_aws_an_s3_root_stops_before_spark_naming_the_package(
    airflow_db: None, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    path = _s3_run_setup(moto_endpoint, monkeypatch, "e2e-no-jars", {})
    run = load_dag(path, DAG_ID).test()
    assert {ti.task_id: ti.state for ti in run.get_task_instances()} == {"count": "failed"}
    captured = capfd.readouterr()
    text = captured.out + captured.err
    # Inputs are measured before the launcher is picked: this error means the S3 input was measured with
    # the connection's credentials (fsspec's defaults reach no store here); nothing was submitted.
    assert f"region region-1 (stages count): storage_root 's3://{S3_BUCKET}/e2e-no-jars/fg'" in text
    assert "org.apache.hadoop:hadoop-aws:3.5.0" in text
    assert "Submitting region" not in text
    assert S3_SECRET not in text


def test_the_tpch_pipeline_on_an_s3_root_answers_right(
    airflow_db: None,
    moto_endpoint: str,
    s3a_jars: list[str],
    tpch_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The example pipeline with its tables and every stage's output on S3 (local Spark, S3A, the connection's
    credentials), its answers equal to an independent engine's."""
    from tests.conftest import DAGS_FOLDER, REPO
    from tests.e2e.conftest import install_dag_file
    from tests.tpch import reference

    _s3_run_setup(moto_endpoint, monkeypatch, "e2e-tpch", {"spark.jars": ",".join(s3a_jars)})
    options = s3_options(moto_endpoint)
    data = f"s3://{S3_BUCKET}/e2e-tpch/tables"
    for table in tpch_dir.glob("*.parquet"):
        filesystem.write_bytes(f"{data}/{table.name}", table.read_bytes(), options)
    for name in ("tpch_pipeline.py", "tpch_queries.py", "tpch_data.py"):
        install_dag_file(REPO / "dags_examples" / name)
    run = load_dag(DAGS_FOLDER / "tpch_pipeline.py", "tpch_pipeline").test(run_conf={"data_dir": data})
    assert run.state == "success", {ti.task_id: ti.state for ti in run.get_task_instances()}
    results = stage_results("tpch_pipeline", run.run_id)[1]
    outputs = {stage: result["output"] for stage, result in results.items() if result["output"]["path"]}
    assert outputs and all(o["path"].startswith(f"s3://{S3_BUCKET}/e2e-tpch/fg/") for o in outputs.values())

    def answer(stage: str) -> pa.Table:
        committed = read_committed(outputs[stage]["path"], storage_options=options)
        return pa.concat_tables([_read_parquet(uri, options) for uri in committed.uris])

    reference.assert_same_answer(
        answer("q1_pricing_summary"), reference.q1(tpch_dir), keys=["l_returnflag", "l_linestatus"], atol=1e-6
    )
    reference.assert_same_answer(answer("q5_local_supplier_volume"), reference.q5(tpch_dir), keys=["n_name"])
    assert S3_SECRET not in "".join(capfd.readouterr())
