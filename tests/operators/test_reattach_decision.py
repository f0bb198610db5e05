"""How a leader decides to reattach: the application its earlier try stored, as its cluster manager reports it.

The master is an HTTP server on 127.0.0.1 answering ``/json/`` in the real shape; the task state store is a
dict with the accessor's ``get``/``set``/``delete`` (the real one needs a running task; the whole path runs
under real Airflow in tests/cluster/test_reattach.py).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import ItemsView
from pathlib import Path
from typing import Any

import pendulum
import pytest
from airflow.sdk import DAG

from airflow_provider_finegrained.execution.reattach import APPLICATION_KEY
from airflow_provider_finegrained.execution.region_errors import ApplicationStatusUnknown
from airflow_provider_finegrained.execution.region_outcome import Failed
from airflow_provider_finegrained.execution.region_sequence import RegionRunner
from airflow_provider_finegrained.launchers.base import LaunchHandle
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator, dag_plan
from airflow_provider_finegrained.operators.task_report import TaskReport
from tests.launchers.test_remote import DRIVER_ID, HANDLE, FakeManager, manager, standalone_settings  # noqa: F401


class Store:
    """The task state store's calls, on a dict."""

    def __init__(self, **values: Any) -> None:
        self.values = dict(values)

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    def set(self, key: str, value: Any) -> None:
        self.values[key] = value

    def delete(self, key: str) -> None:
        self.values.pop(key, None)


class TaskInstance:
    try_number = 2

    def xcom_push(self, key: str, value: Any) -> None:
        raise AssertionError("deciding pushes nothing")

    def xcom_pull(self, task_ids: str, key: str) -> Any:
        raise AssertionError("deciding pulls nothing")


def runner(manager: FakeManager, tmp_path: Path, store: Store | None) -> RegionRunner:  # noqa: F811
    with DAG("reattach_decision", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
        stage = SparkStageOperator(task_id="only", python_callable=lambda spark: spark.range(1))
    plan = dag_plan(dag)
    settings = standalone_settings(manager.url, storage_root=str(tmp_path))
    context = {"ti": TaskInstance(), "run_id": "run-1", "task_state_store": store}
    return RegionRunner(stage, plan, plan.stages["only"].region, settings, context, TaskReport(context))


@pytest.mark.parametrize(
    ("driver_state", "reattaches"),
    [
        ("SUBMITTED", True),
        ("RUNNING", True),
        ("FINISHED", True),
        ("FAILED", False),
        ("ERROR", False),
        ("KILLED", False),
    ],
)
def test_reattaches_only_to_an_application_running_or_finished_well(
    manager: FakeManager,  # noqa: F811
    tmp_path: Path,
    driver_state: str | None,
    reattaches: bool,
) -> None:
    if driver_state is not None:
        manager.drivers[DRIVER_ID] = driver_state
    found = runner(manager, tmp_path, Store(**{APPLICATION_KEY: HANDLE.to_dict()})).record.prior_application()
    if reattaches:
        assert found is not None
        handle, status = found
        assert (handle, status.driver_id) == (HANDLE, DRIVER_ID)
    else:
        assert found is None


class Answers(dict[str, str]):
    """The driver as the master lists it, one answer per ask (None: not listed); the last answer stays."""

    def __init__(self, *answers: str | None) -> None:
        super().__init__()
        self.answers = list(answers)

    def items(self) -> ItemsView[str, str]:
        state = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return ({} if state is None else {DRIVER_ID: state}).items()


@pytest.mark.parametrize("unknown", ["UNKNOWN", None], ids=["unknown-state", "not-listed"])
def test_unknown_application_status_at_reattach_is_asked_again_not_taken_as_gone(
    manager: FakeManager,  # noqa: F811
    tmp_path: Path,
    unknown: str | None,
) -> None:
    manager.drivers = Answers(unknown, unknown, "RUNNING")
    run = runner(manager, tmp_path, Store(**{APPLICATION_KEY: HANDLE.to_dict()}))
    run.record.unknown_poll_s = 0.0  # the bound is what matters here, not the pace
    found = run.record.prior_application()
    assert found is not None
    handle, status = found
    assert (handle, status.state) == (HANDLE, "running")
    assert manager.requests.count(("GET", "/json/")) == 3


@pytest.mark.parametrize("unknown", ["UNKNOWN", None], ids=["unknown-state", "not-listed"])
def test_an_application_still_unknown_fails_the_try_instead_of_submitting_again(
    manager: FakeManager,  # noqa: F811
    tmp_path: Path,
    unknown: str | None,
) -> None:
    manager.drivers = Answers(unknown)
    store = Store(**{APPLICATION_KEY: HANDLE.to_dict()})
    run = runner(manager, tmp_path, store)
    run.record.unknown_wait_s = 0.0  # asked once: the bound's end
    message = (
        f"region {run.region} (stages only): cannot tell whether application {DRIVER_ID}, submitted by try 1, still "
        "runs on spark://127.0.0.1:7077: "
    )
    found = run.record.prior_application()
    assert isinstance(found, Failed) and not found.final  # a retry asks again
    assert isinstance(found.error, ApplicationStatusUnknown)
    assert re.match(re.escape(message), str(found.error))
    assert "not submitting again, which could run two applications of this region side by side" in str(found.error)
    assert (
        f"delete the task state key {APPLICATION_KEY!r} of task 'only' (DELETE /api/v2/dags/reattach_decision/"
        f"dagRuns/run-1/taskInstances/only/state-store/{APPLICATION_KEY}) and clear the task"
    ) in str(found.error)
    assert store.values == {APPLICATION_KEY: HANDLE.to_dict()}  # kept: a retry asks again


@pytest.mark.parametrize(
    "stored",
    [
        None,
        {"launcher": "standalone"},  # unreadable
        dataclasses.replace(HANDLE, master="spark://elsewhere:7077").to_dict(),  # the connection changed
        dataclasses.replace(HANDLE, deploy_mode="client").to_dict(),  # cannot be followed
    ],
)
def test_nothing_to_reattach_to_submits_anew(
    manager: FakeManager,  # noqa: F811
    tmp_path: Path,
    stored: dict[str, Any] | None,
) -> None:
    manager.drivers[DRIVER_ID] = "RUNNING"
    store = Store() if stored is None else Store(**{APPLICATION_KEY: stored})
    assert runner(manager, tmp_path, store).record.prior_application() is None
    assert manager.requests == []  # nothing worth asking the master about


def test_without_a_task_state_store_nothing_is_remembered(manager: FakeManager, tmp_path: Path) -> None:  # noqa: F811
    run = runner(manager, tmp_path, None)
    assert run.record.prior_application() is None
    run.record.remember(HANDLE)  # logs that a retry cannot reattach; nothing to write to
    store = Store()
    run = runner(manager, tmp_path, store)
    run.record.remember(HANDLE)
    assert LaunchHandle.from_dict(store.values[APPLICATION_KEY]) == HANDLE
    run.record.forget()
    assert store.values == {}


class RecordingTaskInstance(TaskInstance):
    def __init__(self) -> None:
        self.pushed: dict[str, Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed[key] = value


def stage_in_dag() -> SparkStageOperator:
    with DAG("resume_events", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
        return SparkStageOperator(task_id="only", python_callable=lambda spark: spark.range(1), deferrable=True)


def test_resuming_without_the_applications_handle_fails_clearly() -> None:
    from airflow.sdk.exceptions import AirflowFailException

    with pytest.raises(AirflowFailException, match="stage 'only': resumed without its application: launch handle"):
        stage_in_dag().execute_complete({"ti": RecordingTaskInstance(), "run_id": "run-1"}, {"status": "succeeded"})


def test_an_application_the_trigger_lost_track_of_fails_the_try_for_a_retry_to_ask_again() -> None:
    from airflow_provider_finegrained.execution.region_errors import StageFailedError
    from airflow_provider_finegrained.operators.xcom_writes import REGION_FAILURE_KEY

    ti = RecordingTaskInstance()
    event = {"status": "unknown", "detail": "the master did not answer", "handle": HANDLE.to_dict(), "facts": {}}
    with pytest.raises(StageFailedError) as failure:
        stage_in_dag().execute_complete({"ti": ti, "run_id": "run-1"}, event)
    assert str(failure.value) == (
        f"stage 'only': lost track of region region-1's application {DRIVER_ID} on spark://127.0.0.1:7077: "
        "the master did not answer; a retry asks the cluster manager again and reattaches if it still runs"
    )
    assert ti.pushed[REGION_FAILURE_KEY]["stage"] == "only"  # for the region's other stages


def test_deferrable_defaults_to_the_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    with DAG("deferrable_default", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
        assert SparkStageOperator(task_id="a", python_callable=print).deferrable is False
        monkeypatch.setenv("AIRFLOW__OPERATORS__DEFAULT_DEFERRABLE", "true")
        assert SparkStageOperator(task_id="b", python_callable=print).deferrable is True
        monkeypatch.setenv("AIRFLOW__FINEGRAINED__DEFAULT_DEFERRABLE", "false")
        assert SparkStageOperator(task_id="c", python_callable=print).deferrable is False
        assert SparkStageOperator(task_id="d", python_callable=print, deferrable=True).deferrable is True


class Launcher:
    """Records the kills a runner asks of its launcher."""

    def __init__(self) -> None:
        self.killed: list[LaunchHandle | None] = []

    def kill(self, handle: LaunchHandle | None) -> str:
        self.killed.append(handle)
        return "killed"


@pytest.mark.parametrize(("follower", "kills"), [(None, True), (1, True), (2, False)])
def test_a_superseded_try_leaves_the_application_its_retry_follows_running(
    manager: FakeManager,  # noqa: F811
    tmp_path: Path,
    follower: int | None,
    kills: bool,
) -> None:
    """Try 1's host lost the network; try 2 reattached. When try 1 comes back, Airflow stops it: its kill must
    not end the application try 2 follows (it did on the multi-host rehearsal, failing try 2 as well)."""
    manager.drivers[DRIVER_ID] = "RUNNING"
    handle = dataclasses.replace(HANDLE, region_folder=str(tmp_path / "_regions" / "region-1" / "try=1"))
    store = Store(**{APPLICATION_KEY: handle.to_dict()})
    if follower is not None:
        retry = runner(manager, tmp_path, store)  # TaskInstance.try_number is 2
        dataclasses.replace(retry.record, try_number=follower).adopt(handle)
    store.get = None  # type: ignore[assignment,method-assign]  # a task being stopped may not reach Airflow's API
    first = runner(manager, tmp_path, store)
    first.submission.handle, launcher = handle, Launcher()  # what try 1 submitted and launched
    first._launcher = launcher  # type: ignore[assignment]
    first.kill()
    assert launcher.killed == ([handle] if kills else [])


class UnreachableGrant:
    def release(self) -> None:
        raise OSError("the storage root cannot be reached")


def test_a_kill_stops_the_application_even_when_its_reservation_cannot_be_released(
    manager: FakeManager,  # noqa: F811
    tmp_path: Path,
) -> None:
    """A host cut off from the network: Airflow's supervisor stops the task, the ledger on S3 is out of reach."""
    run = runner(manager, tmp_path, Store())
    run.submission.handle, launcher = HANDLE, Launcher()
    run._launcher, run._grant = launcher, UnreachableGrant()  # type: ignore[assignment]
    run.kill()
    assert launcher.killed == [HANDLE]
