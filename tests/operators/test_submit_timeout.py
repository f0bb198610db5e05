"""``submit_timeout`` in cluster deploy mode: an application that outlives it is killed on its cluster manager
and the task fails naming the stage and ``submit_timeout`` (issue 30).

The cluster manager is a YARN ResourceManager on 127.0.0.1 answering in the real shape (tests/launchers), whose
application stays ACCEPTED: a queue that never admits it. spark-submit is a script that reports the application
id and then follows it (sleeps), as ``spark.yarn.submit.waitAppCompletion`` does; no JVM. The trigger side is in
tests/triggers/test_region_application.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pendulum
import pytest
from airflow.sdk import DAG

from airflow_provider_finegrained.execution.reattach import APPLICATION_KEY
from airflow_provider_finegrained.execution.region_context import RunFacts
from airflow_provider_finegrained.execution.region_errors import SubmitTimeoutError
from airflow_provider_finegrained.execution.region_outcome import Failed
from airflow_provider_finegrained.execution.region_sequence import RegionRunner
from airflow_provider_finegrained.launchers.base import LaunchSpec
from airflow_provider_finegrained.launchers.yarn.launcher import YarnLauncher
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator, StageFailedError, dag_plan
from airflow_provider_finegrained.operators.task_report import TaskReport
from airflow_provider_finegrained.settings import ConnectionSettings
from tests.launchers.test_launchers import APP_ID, spark_home_with_submit
from tests.launchers.test_remote import HANDLE, FakeManager, manager  # noqa: F401
from tests.operators.test_reattach_decision import RecordingTaskInstance, Store


def stage(submit_timeout: float | None, **kwargs: Any) -> SparkStageOperator:
    with DAG("submit_timeout", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
        return SparkStageOperator(
            task_id="only", python_callable=lambda spark: spark.range(1), submit_timeout=submit_timeout, **kwargs
        )


def test_submit_timeout_in_cluster_mode_kills_an_application_never_accepted(
    manager: FakeManager,  # noqa: F811
    tmp_path: Path,
) -> None:
    manager.apps[APP_ID] = ("ACCEPTED", "UNDEFINED")  # never admitted
    home = spark_home_with_submit(tmp_path, f'echo "INFO Client: Submitted application {APP_ID}"\nexec sleep 60\n')
    fields = {
        "deploy_mode": "cluster",
        "total_cores": 4,
        "total_memory": "8g",
        "spark_home": home,
        "yarn_resourcemanager_url": manager.url,
    }
    settings = ConnectionSettings.from_connection_fields("yarn", fields, airflow_home=str(tmp_path))
    leader = stage(submit_timeout=1.0)
    plan = dag_plan(leader.dag)
    store = Store()
    context = {"ti": RecordingTaskInstance(), "run_id": "run-1", "task_state_store": store}
    runner = RegionRunner(leader, plan, plan.stages["only"].region, settings, context, TaskReport(context))
    spec = LaunchSpec(runner.region, runner.app_name, str(tmp_path / "job.json"), timeout_s=leader.submit_timeout)
    failed = runner.launch(YarnLauncher(settings), spec, RunFacts({"mode": "cold"}))
    assert isinstance(failed, Failed) and isinstance(failed.error, SubmitTimeoutError)
    assert str(failed.error).startswith(
        f"stage 'only': region {runner.region} (stages only) did not end within submit_timeout (1 s after its "
        f"submission): application {APP_ID} was still "
    )
    assert "ACCEPTED" in str(failed.error)
    # Killed where it waits, not only its spark-submit: the ResourceManager was told; nothing left to reattach to.
    assert ("PUT", f'/ws/v1/cluster/apps/{APP_ID}/state {{"state": "KILLED"}}') in manager.requests
    assert manager.apps[APP_ID] == ("KILLED", "KILLED")
    assert APPLICATION_KEY not in store.values


def test_submit_timeout_of_a_deferred_region_fails_the_leader_naming_it() -> None:
    detail = f"application {HANDLE.remote_id} was still pending; Driver {HANDLE.remote_id} ended: KILLED"
    ti = RecordingTaskInstance()
    event = {"status": "timeout", "detail": detail, "handle": HANDLE.to_dict(), "facts": {}}
    message = (
        "stage 'only': region region-1 (stages only) did not end within submit_timeout (30 s after its submission): "
        + detail
    )
    with pytest.raises(StageFailedError, match=re.escape(message)):
        stage(submit_timeout=30.0, deferrable=True).execute_complete({"ti": ti, "run_id": "run-1"}, event)
    assert ti.pushed["finegrained_region_failure"]["error"] == message
