"""Failures end to end: clear messages naming the stage, retries rerun the region, timeouts leave nothing."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import psutil
import pytest

from airflow_provider_finegrained.cli.report import stage_results
from tests.e2e.conftest import load_dag, write_dag_file

pytestmark = pytest.mark.slow

HEADER = """
import datetime, os, time
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.dags.declaration import ExternalDataset, Input
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

START = pendulum.datetime(2026, 1, 1, tz="UTC")
"""


def dag_file(name: str, body: str) -> Path:
    return write_dag_file(f"{name}.py", HEADER + textwrap.dedent(body))


def run_dag(path: Path, dag_id: str, **kwargs: Any) -> tuple[Any, dict[str, str]]:
    run = load_dag(path, dag_id).test(**kwargs)
    return run, {ti.task_id: ti.state for ti in run.get_task_instances()}


@pytest.mark.security
def test_stage_errors_name_the_stage_and_reach_the_log(airflow_db: None, capfd: pytest.CaptureFixture[str]) -> None:
    path = dag_file(
        "bad_stages",
        """
        def raises(spark):
            raise ValueError("the input looks wrong")

        def returns_int(spark):
            return 42

        def returns_pandas(spark):
            return spark.range(3).toPandas()

        with DAG("bad_stages", schedule=None, start_date=START):
            Stage(task_id="raises", python_callable=raises)
            Stage(task_id="returns_int", python_callable=returns_int)
            Stage(task_id="returns_pandas", python_callable=returns_pandas)
    """,
    )
    _, states = run_dag(path, "bad_stages")
    assert states == {"raises": "failed", "returns_int": "failed", "returns_pandas": "failed"}
    log = capfd.readouterr()
    text = log.out + log.err
    assert "region region-1 failed in stage 'raises': ValueError: the input looks wrong" in text
    assert 'raise ValueError("the input looks wrong")' in text  # the stage's own traceback
    assert "stage 'returns_int' returned int, not a pyspark.sql.DataFrame" in text
    assert "stage 'returns_pandas' returned a pandas DataFrame, not a pyspark.sql.DataFrame" in text
    assert "spark.createDataFrame(pdf)" in text


@pytest.mark.security
def test_bad_inputs_fail_before_spark_with_the_fix(airflow_db: None, capfd: pytest.CaptureFixture[str]) -> None:
    path = dag_file(
        "bad_inputs",
        """
        def passthrough(spark, data):
            return data

        def source(spark):
            return spark.range(3)

        with DAG("bad_inputs", schedule=None, start_date=START):
            Stage(task_id="missing_file", python_callable=passthrough,
                  inputs={"data": ExternalDataset("/nonexistent/finegrained/table.parquet")})
            Stage(task_id="escapes_root", python_callable=source, output_path="/tmp/elsewhere")
            failing = Stage(task_id="failing_upstream", python_callable=passthrough,
                            inputs={"data": ExternalDataset("/nonexistent/other.parquet")})
            Stage(task_id="reads_failed", python_callable=passthrough, inputs={"data": failing},
                  trigger_rule="all_done")
    """,
    )
    _, states = run_dag(path, "bad_inputs")
    assert set(states.values()) == {"failed"}
    text = "".join(capfd.readouterr())
    missing = "/nonexistent/finegrained/table.parquet"
    assert f"stage 'missing_file', input 'data': external input {missing} does not exist" in text
    assert "stage 'escapes_root': output_path '/tmp/elsewhere' is outside the storage root" in text
    assert "stage 'reads_failed' reads from 'failing_upstream', but 'failing_upstream' published no output" in text


def test_retry_reruns_the_region_and_no_stage_runs_twice_per_try(airflow_db: None, tmp_path: Path) -> None:
    journal = tmp_path / "journal.txt"
    path = dag_file(
        "retry_region",
        f"""
        JOURNAL = {str(journal)!r}

        def first(spark):
            with open(JOURNAL, "a") as f:
                f.write("first\\n")
            return spark.range(100)

        def second(spark, rows):
            with open(JOURNAL, "a") as f:
                f.write("second\\n")
            if open(JOURNAL).read().count("second") == 1:
                raise RuntimeError("transient failure")
            return rows.selectExpr("id * 2 AS doubled")

        with DAG("retry_region", schedule=None, start_date=START,
                 default_args={{"retries": 1, "retry_delay": datetime.timedelta(seconds=0)}}):
            a = Stage(task_id="first", python_callable=first)
            Stage(task_id="second", python_callable=second, inputs={{"rows": Input(a, mode="pipelined")}})
    """,
    )
    run, states = run_dag(path, "retry_region")
    assert states == {"first": "success", "second": "success"}
    # Try 1 ran both stages once and failed in 'second'; the retry reran the whole region once.
    assert journal.read_text().split() == ["first", "second", "first", "second"]
    _, results = stage_results("retry_region", run.run_id)
    assert results["second"]["output"]["rows"] == 100
    assert results["second"]["output"]["try_number"] == 2
    assert results["first"]["trace"]["application_id"] == results["second"]["trace"]["application_id"]


def test_task_timeout_ends_the_spark_application(airflow_db: None) -> None:
    path = dag_file(
        "timeout_stage",
        """
        def sleeps(spark):
            time.sleep(600)
            return spark.range(1)

        with DAG("timeout_stage", schedule=None, start_date=START):
            Stage(task_id="sleeps", python_callable=sleeps, execution_timeout=datetime.timedelta(seconds=40))
    """,
    )
    _, states = run_dag(path, "timeout_stage")
    assert states == {"sleeps": "failed"}
    leftovers = [
        p.info for p in psutil.process_iter(["pid", "cmdline"]) if "timeout_stage" in " ".join(p.info["cmdline"] or [])
    ]
    assert leftovers == []


@pytest.mark.security
def test_an_unwritable_storage_root_fails_naming_the_setting_and_the_stage(
    airflow_db: None, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    import json

    # sysfs refuses every mkdir, even for root (the tests' user), as a read-only mount does.
    conn = {"conn_type": "finegrained_spark", "host": "local[1]", "extra": {"storage_root": "/sys/fg-root"}}
    monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", json.dumps(conn))
    path = dag_file(
        "unwritable_root",
        """
        with DAG("unwritable_root", schedule=None, start_date=START):
            Stage(task_id="numbers", python_callable=lambda spark: spark.range(3))
    """,
    )
    _, states = run_dag(path, "unwritable_root")
    assert states == {"numbers": "failed"}
    text = "".join(capfd.readouterr())
    assert "storage_root '/sys/fg-root' cannot be written for stage(s) 'numbers': Operation not permitted" in text
    assert "Submitting region" not in text


SITECUSTOMIZE = """
import pathlib, sys

# Only in the region's driver program: count its starts, and let the file spark.files names exist from the
# second start on, so the first SparkContext fails to start (FileNotFoundException) and the second starts.
if sys.argv and sys.argv[0].endswith("driver.py"):
    folder = pathlib.Path({folder!r})
    starts = folder / "starts"
    started = int(starts.read_text()) if starts.exists() else 0
    starts.write_text(str(started + 1))
    if {heal} and started >= 1:
        (folder / "shipped.txt").write_text("here now")
"""

START_FAILS = """
def one(spark):
    return spark.range(5)

with DAG("{dag_id}", schedule=None, start_date=START):
    Stage(task_id="one", python_callable=one, spark_conf={{"spark.files": {shipped!r}}})
"""


@pytest.mark.parametrize("heal", [True, False], ids=["started-the-second-time", "fails-the-same-way"])
def test_a_sparkcontext_that_did_not_start_is_submitted_once_more(
    heal: bool,
    airflow_db: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The driver's SparkContext fails in its start (a file it ships is missing, as a race would fail it): the
    leader submits the region once more, since nothing ran; once only, when it fails again the same way."""
    (tmp_path / "sitecustomize.py").write_text(SITECUSTOMIZE.format(folder=str(tmp_path), heal=heal))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    dag_id = f"context_start_{'heals' if heal else 'fails'}"
    shipped = str(tmp_path / "shipped.txt")
    run, states = run_dag(dag_file(dag_id, START_FAILS.format(dag_id=dag_id, shipped=shipped)), dag_id)
    text = "".join(capfd.readouterr())
    assert (tmp_path / "starts").read_text() == "2"  # submitted twice, never three times
    assert text.count("its first SparkContext did not start") == (2 if heal else 1)  # the warning, the trace
    assert f"FileNotFoundException: File file:{shipped} does not exist" in text
    if heal:
        assert states == {"one": "success"}
        trace = stage_results(dag_id, run.run_id)[1]["one"]["trace"]
        assert trace["execution"]["restarted"].startswith("its first SparkContext did not start (Py4JJavaError")
    else:
        assert states == {"one": "failed"}
        assert "region region-1: its SparkContext did not start (Py4JJavaError: java.io.FileNotFoundException" in text
    # No spark-submit of this DAG's left (its application name starts with the DAG's id).
    assert not [p for p in psutil.process_iter(["cmdline"]) if dag_id in " ".join(p.info["cmdline"] or [])]
