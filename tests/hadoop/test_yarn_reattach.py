"""A worker that dies mid-region in YARN cluster mode: the retry reattaches, and the ResourceManager counts one
application for the region; the downstream stage defers and its trigger follows its YARN application.

The same trial as tests/cluster/test_reattach.py (its DAG, its first try in a child process that is SIGKILLed,
the scheduler's view of a lost worker, and the retry through ``dag.test``'s loop), on the session's YARN.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pendulum
import pytest

from airflow_provider_finegrained.cli.report import stage_results
from airflow_provider_finegrained.spark.hadoop_cluster import HadoopCluster
from tests.cluster.test_reattach import DAG_ID as STANDALONE_DAG_ID
from tests.cluster.test_reattach import DAG_TEXT, first_try_dies_once_recorded, run_on, worker_lost
from tests.e2e.conftest import load_dag, write_dag_file
from tests.hadoop.test_yarn import applications, connection, read_output

pytestmark = [pytest.mark.slow, pytest.mark.hadoop]

DAG_ID = "reattach_on_yarn"


def test_a_retry_after_the_worker_died_reattaches_to_the_yarn_application(
    hadoop_cluster: HadoopCluster,
    airflow_db: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    cluster = hadoop_cluster
    monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", connection(cluster, deploy_mode="cluster"))
    path = write_dag_file(f"{DAG_ID}.py", textwrap.dedent(DAG_TEXT.replace(STANDALONE_DAG_ID, DAG_ID)))
    when = pendulum.now("UTC").replace(microsecond=0)
    before = {a["id"] for a in applications(cluster, DAG_ID)}

    # -- try 1, in a worker that dies once the region's application runs on YARN
    first_try_dies_once_recorded(path, when, DAG_ID, tmp_path / "first-try.log")
    (submitted,) = [a for a in applications(cluster, DAG_ID) if a["id"] not in before]
    assert submitted["state"] in ("ACCEPTED", "RUNNING"), submitted  # it outlived its worker
    assert worker_lost(DAG_ID, "slow") == 1
    capfd.readouterr()

    # -- try 2, of the same run
    run = run_on(load_dag(path, DAG_ID), when)
    streams = ["".join(capfd.readouterr()), caplog.text]
    text = "\n".join(streams)
    assert run.state == "success", text[-5000:]
    assert {ti.task_id: ti.try_number for ti in run.get_task_instances()}["slow"] == 2

    # The ResourceManager ran one application per region: try 1's for `slow`, one for `squares`.
    new = [a for a in applications(cluster, DAG_ID) if a["id"] not in before]
    assert len(new) == 2 and submitted["id"] in {a["id"] for a in new}, [a["name"] for a in new]
    assert {(a["state"], a["finalStatus"]) for a in new} == {("FINISHED", "SUCCEEDED")}
    assert f"reattached to {submitted['id']} submitted by try 1" in text
    assert max(stream.count("Submitting region") for stream in streams) == 1

    results = stage_results(DAG_ID, run.run_id)[1]
    slow, squares = results["slow"], results["squares"]
    assert slow["trace"]["application_id"] == submitted["id"]
    assert "/try=1" in slow["output"]["path"] and slow["output"]["rows"] == 1000
    table = read_output(cluster, squares["output"]["data_path"])
    assert sorted(table.column("n").to_pylist()) == list(range(1000))
    # `squares` deferred while its YARN application ran, and came back through the trigger.
    assert "the task defers while it runs" in text and "[DAG TEST] running trigger in line" in text
