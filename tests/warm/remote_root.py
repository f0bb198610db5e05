"""What the warm-pool trials on a remote storage root share (tests/e2e/test_warm_object_store.py on S3,
tests/hadoop/test_warm_hdfs.py on HDFS): the DAG, its run, and reading its committed outputs back."""

from __future__ import annotations

import textwrap
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_provider_finegrained.cli.report import stage_results
from airflow_provider_finegrained.runtime.output import read_committed
from airflow_provider_finegrained.storage import filesystem
from tests.e2e.conftest import load_dag, write_dag_file

DAG_TEXT = """
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.dags.declaration import ExternalDataset, Input
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

def counts(spark, raw):
    return raw.groupBy("k").count()

def doubled(spark, counts):
    return counts.selectExpr("k", "count * 2 AS doubled")

def total(spark, doubled):
    return doubled.selectExpr("sum(doubled) AS total")

with DAG("{dag_id}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    c = Stage(task_id="counts", python_callable=counts, inputs={{"raw": ExternalDataset("{raw}")}})
    d = Stage(task_id="doubled", python_callable=doubled, inputs={{"counts": Input(c, mode="pipelined")}})
    Stage(task_id="total", python_callable=total, inputs={{"doubled": Input(d)}})
"""
"""``counts`` and ``doubled`` in one pipelined region, ``total`` in the next: commits on the root between them."""


def write_raw(location: str, options: dict[str, Any]) -> None:
    """The DAG's external input: six rows, keys 1, 2, 2, 3, 3, 3."""
    sink = pa.BufferOutputStream()
    pq.write_table(pa.table({"k": [1, 2, 2, 3, 3, 3]}), sink)
    filesystem.write_bytes(location, sink.getvalue().to_pybytes(), options)


def run_dag(dag_id: str, raw: str) -> tuple[Any, dict[str, dict[str, Any]]]:
    """``dag.test()`` of the DAG reading ``raw``; the run and its stages' results from XCom."""
    path = write_dag_file(f"{dag_id}.py", textwrap.dedent(DAG_TEXT.format(dag_id=dag_id, raw=raw)))
    run = load_dag(path, dag_id).test()
    return run, stage_results(dag_id, run.run_id)[1]


def committed_rows(location: str, options: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of the files the commit marker at ``location`` lists, read with ``options``."""
    tables = []
    for uri in read_committed(location, storage_options=options).uris:
        with filesystem.open_file(uri, "rb", options) as handle:
            tables.append(pq.read_table(handle))
    rows: list[dict[str, Any]] = pa.concat_tables(tables).to_pylist()
    return rows


CARRIERS = ("ready driver", "task process")
"""Where a warm region runs: the pool's ready region driver, or (the driver turned off) the task process."""


def run_in(carrier: str, dag_id: str, raw: str, monkeypatch: Any, capfd: Any) -> tuple[Any, dict[str, Any], str]:
    """Run the DAG with its region in ``carrier``; the run, its results and the task output, every stage a success."""
    from airflow_provider_finegrained.warm.driver_client import DriverUnavailable, ReadyDriver

    if carrier == "task process":
        # The region runs where the ready driver would have: this process, which loads the job itself.
        def unavailable(pool: Any, timeout_s: float = 5.0) -> ReadyDriver:
            raise DriverUnavailable("turned off by the test")

        monkeypatch.setattr(ReadyDriver, "connect", unavailable)
    run, results = run_dag(dag_id, raw)
    out = "".join(capfd.readouterr())
    states = {ti.task_id: ti.state for ti in run.get_task_instances()}
    assert states == dict.fromkeys(("counts", "doubled", "total"), "success"), out[-4000:]
    if carrier == "ready driver":
        assert "runs in the warm pool's ready region driver" in out
    else:
        assert "Region region-1 runs in this task process: turned off by the test" in out
    return run, results, out


def assert_committed(results: dict[str, Any], root: str, options: dict[str, Any]) -> None:
    """The outputs are committed under ``root`` and read back with ``options``; the statuses reached the tasks."""
    doubled = results["doubled"]["output"]
    assert doubled["path"].startswith(root), doubled
    assert doubled["rows"] == 3 and doubled["total_bytes"] > 0, doubled
    rows = committed_rows(doubled["path"], options)
    assert sorted((r["k"], r["doubled"]) for r in rows) == [(1, 2), (2, 4), (3, 6)]
    assert committed_rows(results["total"]["output"]["path"], options) == [{"total": 12}]
    # Spark's task report of the stage, from the status the region wrote on the root.
    assert results["doubled"]["trace"]["spark_tasks"]["executors"] == ["driver"]
