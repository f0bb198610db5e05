"""OpenLineage events and asset events of a real run, through Airflow's own OpenLineage listener.

The run happens in a fresh Python (OpenLineage reads its settings once, when plugins load) with the
file transport writing every event as a JSON line; its working folder is not the repository, whose
setuptools ``*.egg-info`` would make the Task SDK see this provider's plugin twice and stop loading
plugins there (the listener among them). The listener emits from a forked process, as in production.
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
from airflow.utils.session import create_session
from sqlalchemy import select
from airflow_provider_finegrained.cli.report import stage_results

bag = DagBag(dag_folder=sys.argv[1], safe_mode=False)
assert not bag.import_errors, bag.import_errors
run = bag.dags["lineage_run"].test()
with create_session() as session:
    events = [
        {"uri": e.asset.uri, "extra": e.extra, "task": e.source_task_id}
        for e in session.scalars(select(AssetEvent)).all()
        if e.source_dag_id == "lineage_run"
    ]
    queued = [q.target_dag_id for q in session.scalars(select(AssetDagRunQueue)).all()]
_, results = stage_results("lineage_run", run.run_id)
conf = {k: v for k, v in results["counts"]["trace"]["spark_conf"].items() if k.startswith("spark.openlineage.")}
print("RESULT " + json.dumps({"state": str(run.state), "assets": events, "queued": queued, "openlineage_conf": conf}))
"""


def events_of(path: Path) -> list[dict[str, Any]]:
    """Every event in the file transport's file (processes emitting at once may leave two on one line)."""
    decoder, text, events, at = json.JSONDecoder(), path.read_text(), [], 0
    while (at := len(text) - len(text[at:].lstrip())) < len(text):
        event, at = decoder.raw_decode(text, at)
        events.append(event)
    return events


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
        [sys.executable, "-c", RUNNER, str(path)], capture_output=True, text=True, env=env, timeout=600, cwd=tmp_path
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, done.stdout[-3000:] + done.stderr[-3000:]
    result = json.loads(line.removeprefix("RESULT "))
    assert result["state"] == "success", done.stdout[-6000:]

    events = events_of(events_file)
    complete = {e["job"]["name"]: e for e in events if e["eventType"] == "COMPLETE"}
    assert {"lineage_run", "lineage_run.counts", "lineage_run.top"} <= set(complete), events
    counts, top = complete["lineage_run.counts"], complete["lineage_run.top"]
    assert [(d["namespace"], d["name"]) for d in counts["inputs"]] == [("file", str(raw))]
    (counts_out,) = counts["outputs"]
    assert counts_out["namespace"] == "file" and "/lineage_run/" in counts_out["name"]
    # The consumer's input is the producer's output: the same dataset.
    assert [(d["namespace"], d["name"]) for d in top["inputs"]] == [(counts_out["namespace"], counts_out["name"])]
    (top_out,) = top["outputs"]
    assert (top_out["namespace"], top_out["name"]) == ("file", str(export))
    assert top_out["outputFacets"]["outputStatistics"]["rowCount"] == 2
    dag_run = complete["lineage_run"]["run"]["runId"]
    for stage, event in (("counts", counts), ("top", top)):
        decision = event["run"]["facets"]["finegrained_decision"]
        assert decision["stage"] == stage and decision["parallelism"] >= 1 and decision["rule"]
        assert decision["executionMode"] == "cold" and decision["executors"] >= 1
        parent = event["run"]["facets"]["parent"]
        assert (parent["job"]["namespace"], parent["job"]["name"]) == ("fg-tests", "lineage_run")
        assert parent["run"]["runId"] == dag_run
    # Spark's own listener links its events to the task: the application carried the parent settings.
    conf = result["openlineage_conf"]
    assert conf["spark.openlineage.parentJobName"] == "lineage_run.counts"
    assert conf["spark.openlineage.parentRunId"] == counts["run"]["runId"]
    assert conf["spark.openlineage.parentJobNamespace"] == "fg-tests"
    assert conf["spark.openlineage.rootParentJobName"] == "lineage_run"
    assert conf["spark.openlineage.rootParentRunId"] == dag_run

    (asset,) = result["assets"]
    assert asset["uri"] == f"file://{export}" and asset["task"] == "top"
    assert asset["extra"]["rows"] == 2 and asset["extra"]["path"] == str(export)
    # The DAG scheduled on the asset (dag.test() syncs the file's other DAGs first) is queued by the event.
    assert result["queued"] == ["lineage_consumer"]
