"""Estimates corrected by history, end to end: real Airflow (``dag.test``), real Spark (the embedded default's
warm pool, shared with the other warm modules), the history under the real storage root.

One stage reads TPC-H's lineitem (SF 0.01) and hash-partitions its rows by order: it shuffles more bytes
than the parquet it reads (parquet compresses better than Spark's shuffle blocks). With
``history_min_runs`` = 2, runs 1 and 2 decide from bytes on disk and record what
Spark measured; run 3 decides from ``bytes x learned expansion``, the factor the two stored runs teach.
"""

from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pytest

from airflow_provider_finegrained.cli.report import stage_results
from airflow_provider_finegrained.execution.history_store import HistoryStore
from airflow_provider_finegrained.planning.history import learn_expansion
from tests.conftest import embedded_settings
from tests.e2e.conftest import load_dag, write_dag_file

pytestmark = pytest.mark.slow

DAG_ID = "history_learns"
AVG_BYTES_PER_TASK = 128 * 1024

DAG_TEXT = """
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.dags.declaration import ExternalDataset
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage


def by_order(spark, lineitem):
    return lineitem.repartition("l_orderkey")


with DAG("history_learns", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    Stage(task_id="per_order", python_callable=by_order, inputs={"lineitem": ExternalDataset(path=%r)})
"""


def test_the_third_run_decides_from_what_the_first_two_taught(
    tpch_dir: Path, warm_pool_folder: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AIRFLOW__FINEGRAINED__AVG_BYTES_PER_TASK", str(AVG_BYTES_PER_TASK))
    monkeypatch.setenv("AIRFLOW__FINEGRAINED__HISTORY_MIN_RUNS", "2")
    settings = embedded_settings()
    assert (settings.learn_from_history, settings.history_min_runs) == (True, 2)
    store = HistoryStore(settings.storage_root, DAG_ID)
    dag = load_dag(
        write_dag_file(f"{DAG_ID}.py", textwrap.dedent(DAG_TEXT % str(tpch_dir / "lineitem.parquet"))), DAG_ID
    )

    traces = []
    for number in (1, 2, 3):
        if number == 3:  # what the two stored runs teach, read before the run that uses it
            taught = learn_expansion(store.runs("per_order"), 2).expansion
            assert taught is not None and taught.runs == 2
        run = dag.test()
        assert {ti.task_id: ti.state for ti in run.get_task_instances()} == {"per_order": "success"}
        traces.append(stage_results(DAG_ID, run.run_id)[1]["per_order"]["trace"])
        assert len(store.runs("per_order")) == number  # each run added its own object

    first, second, third = traces
    consumed = first["consumed_bytes"]["lineitem"]
    from_bytes = math.ceil(consumed / AVG_BYTES_PER_TASK)
    for plain in (first, second):
        assert (plain["rule"], plain["learned"], plain["decided_parallelism"]) == (
            "bytes / avg_bytes_per_task",
            None,
            from_bytes,
        )
    # Spark's own measurement, recorded: the rows shuffle more bytes than the parquet they were read from.
    recorded = {r.run_id: r for r in store.runs("per_order")}
    ratios = sorted(r.work_ratio for r in recorded.values() if r.learned_work is None)
    assert len(ratios) == 2 and all(r > 1 for r in ratios)
    assert taught.work == pytest.approx((ratios[0] + ratios[1]) / 2, rel=0.01)  # the median of two, 3 digits

    assert third["learned"] == taught.to_dict()
    assert third["rule"] == f"bytes x learned expansion {taught.work:.3g} (2 runs) / avg_bytes_per_task"
    corrected = max(1, math.ceil(math.ceil(consumed * taught.work) / AVG_BYTES_PER_TASK))
    assert third["decided_parallelism"] == corrected > from_bytes
    assert third["spark_conf"]["spark.sql.shuffle.partitions"] == str(third["parallelism"])
    # Only the shuffle side is corrected: the scan split is the one the bytes on disk gave, and the trace says so.
    assert (
        third["spark_conf"]["spark.sql.files.maxPartitionBytes"]
        == first["spark_conf"]["spark.sql.files.maxPartitionBytes"]
    )
    assert any(n.startswith("scan split follows the bytes on disk") for n in third["sizing_notes"])
    assert recorded[run.run_id].learned_work == taught.work  # the third run's record says it was corrected
