"""A region member that is not its leader: whether the region it belongs to succeeded."""

from __future__ import annotations

from typing import Any

from airflow_provider_finegrained.execution.region_errors import StageFailedError
from airflow_provider_finegrained.operators.xcom_writes import REGION_FAILURE_KEY, push_spark_ui

__all__ = ["check_leader"]


def check_leader(context: Any, dag_id: str, task_id: str, region: str, leader: str) -> None:
    """Fail with one message naming the stage that broke and the leader when the region did not succeed.

    Asked of Airflow before any XCom is pulled: pulling the results of a leader that failed would only add
    "XCom not found" errors to this task's log.
    """
    ti = context["ti"]
    run_id = str(context["run_id"])
    states = ti.get_task_states(dag_id=dag_id, task_ids=[leader], run_ids=[run_id])
    state = (states.get(run_id) or {}).get(leader)
    if state == "success":
        return
    ran = f"stage {task_id!r} did not run: it belongs to region {region}, whose Spark application is run by"
    if state == "failed":
        failure = ti.xcom_pull(task_ids=leader, key=REGION_FAILURE_KEY) or {}
        stage = failure.get("stage", leader)
        if failure.get("spark_ui"):  # the failed application's UI is where to look for why
            push_spark_ui(ti, failure["spark_ui"])
        raise StageFailedError(
            f"{ran} its leader {leader!r}, and the region failed in stage {stage!r}: "
            f"{failure.get('error', 'see the log of ' + repr(leader))}"
        )
    raise StageFailedError(
        f"{ran} its leader {leader!r}, which is {state or 'not run'}; it publishes the region's results "
        f"when it succeeds (run {leader!r} first)"
    )
