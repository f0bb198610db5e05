"""OpenLineage and asset events of a real run, through OpenLineage's own extractor manager.

The run happens in a fresh Python (OpenLineage reads its settings once, when plugins load), with the
file transport configured. ``dag.test()`` runs tasks in-process, where Airflow 3.3 does not call the
OpenLineage listener's task hooks (only the DAG run's events are written, seen here), so the test asks
OpenLineage's ExtractorManager for each task's lineage after the run, as the listener does on success.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.e2e.conftest import write_dag_file

pytestmark = pytest.mark.slow

DAG_TEXT = """
import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Asset
from airflow_provider_finegrained.dags.declaration import ExternalDataset
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

def counts(spark, raw):
    return raw.groupBy("k").count()

def top(spark, counts):
    return counts.orderBy("count", ascending=False).limit(2)

with DAG("lineage_run", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    c = Stage(task_id="counts", python_callable=counts, inputs={{"raw": ExternalDataset("{raw}")}})
    Stage(task_id="top", python_callable=top, inputs={{"counts": c}}, output_path="{export}", output_asset=True)

with DAG("lineage_consumer", schedule=[Asset("file://{export}")], start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    EmptyOperator(task_id="report")
"""

RUNNER = """
import json, sys
from airflow.dag_processing.dagbag import DagBag
from airflow.models.asset import AssetDagRunQueue, AssetEvent
from airflow.providers.openlineage.extractors.manager import ExtractorManager
from airflow.providers.openlineage.plugins.adapter import OpenLineageAdapter
from airflow.utils.session import create_session
from airflow.utils.state import TaskInstanceState
from openlineage.client.serde import Serde
from sqlalchemy import select
from airflow_provider_finegrained.cli.report import stage_results

bag = DagBag(dag_folder=sys.argv[1], safe_mode=False)
assert not bag.import_errors, bag.import_errors
dag = bag.dags["lineage_run"]
run = dag.test()
lineage = {}
for ti in run.get_task_instances():
    ti.task = dag.get_task(ti.task_id)
    # What OpenLineage's listener does when a task succeeds: its extractor manager asks the operator.
    found = ExtractorManager().extract_metadata(run, ti.task, TaskInstanceState.SUCCESS, ti)
    lineage[ti.task_id] = {
        "inputs": [[d.namespace, d.name] for d in found.inputs],
        "outputs": [json.loads(Serde.to_json(d)) for d in found.outputs],
        "decision": json.loads(Serde.to_json(found.run_facets["finegrained_decision"])),
        "run_id": OpenLineageAdapter.build_task_instance_run_id(
            dag_id=ti.dag_id, task_id=ti.task_id, try_number=ti.try_number,
            logical_date=run.logical_date or run.run_after, map_index=ti.map_index,
        ),
    }
with create_session() as session:
    events = [
        {"uri": e.asset.uri, "extra": e.extra, "task": e.source_task_id}
        for e in session.scalars(select(AssetEvent)).all()
        if e.source_dag_id == "lineage_run"
    ]
    queued = [q.target_dag_id for q in session.scalars(select(AssetDagRunQueue)).all()]
_, results = stage_results("lineage_run", run.run_id)
conf = {k: v for k, v in results["counts"]["trace"]["spark_conf"].items() if k.startswith("spark.openlineage.")}
out = {"state": str(run.state), "assets": events, "queued": queued, "openlineage_conf": conf, "lineage": lineage}
print("RESULT " + json.dumps(out))
"""


def events_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_every_stage_reports_its_datasets_decision_and_parent_and_its_output_asset(
    airflow_db: None, tmp_path: Path, storage_root: Path
) -> None:
    raw = tmp_path / "raw" / "part-0.parquet"
    raw.parent.mkdir()
    pq.write_table(pa.table({"k": [1, 2, 2, 3, 3, 3]}), raw)
    export = storage_root / "exports" / "top"  # an output_path lies inside the storage root
    path = write_dag_file("lineage_run.py", textwrap.dedent(DAG_TEXT.format(raw=raw, export=export)))
    events_file = tmp_path / "openlineage.jsonl"
    env = os.environ | {
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
            {"type": "file", "log_file_path": str(events_file), "append": True}
        ),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": "fg-tests",
        "AIRFLOW__OPENLINEAGE__SPARK_INJECT_PARENT_JOB_INFO": "True",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": "False",  # a paused consumer DAG is not queued
        "AIRFLOW__FINEGRAINED__WARM_POOL": "off",  # a cold application carries the parent job settings
    }
    done = subprocess.run(
        [sys.executable, "-c", RUNNER, str(path)], capture_output=True, text=True, env=env, timeout=600
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(line.removeprefix("RESULT "))
    assert result["state"] == "success", done.stdout[-6000:]

    counts, top = result["lineage"]["counts"], result["lineage"]["top"]
    assert counts["inputs"] == [["file", str(raw)]]
    (counts_out,) = counts["outputs"]
    assert counts_out["namespace"] == "file" and "/lineage_run/" in counts_out["name"]
    # The consumer's input is the producer's output: the same dataset.
    assert top["inputs"] == [[counts_out["namespace"], counts_out["name"]]]
    (top_out,) = top["outputs"]
    assert (top_out["namespace"], top_out["name"]) == ("file", str(export))
    assert top_out["outputFacets"]["outputStatistics"]["rowCount"] == 2
    for stage, found in (("counts", counts), ("top", top)):
        decision = found["decision"]
        assert decision["stage"] == stage and decision["parallelism"] >= 1 and decision["rule"]
        assert decision["executionMode"] == "cold" and decision["executors"] >= 1
    # Spark's own listener links its events to the task: the application carried the parent settings.
    conf = result["openlineage_conf"]
    assert conf["spark.openlineage.parentJobName"] == "lineage_run.counts"
    assert conf["spark.openlineage.parentRunId"] == counts["run_id"]
    assert conf["spark.openlineage.parentJobNamespace"] == "fg-tests"
    assert conf["spark.openlineage.rootParentJobName"] == "lineage_run"
    # The DAG's own events went through the file transport (the listener is on).
    assert any(e["job"]["name"] == "lineage_run" for e in events_of(events_file))

    (asset,) = result["assets"]
    assert asset["uri"] == f"file://{export}" and asset["task"] == "top"
    assert asset["extra"]["rows"] == 2 and asset["extra"]["path"] == str(export)
    # The DAG scheduled on the asset (dag.test() syncs the file's other DAGs first) is queued by the event.
    assert result["queued"] == ["lineage_consumer"]
