"""The region application trigger: serializes, follows the application on a master's /json/ until it ends.

The master is an HTTP server on 127.0.0.1 answering ``/json/`` in the real shape; the connection is read
by the trigger itself (as in the triggerer), from an ``AIRFLOW_CONN_*`` variable.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest

from airflow_provider_finegrained.triggers.region_application import RegionApplicationTrigger
from tests.launchers.test_remote import DRIVER_ID, HANDLE, FakeManager, manager  # noqa: F401 - the fixture

FACTS = {"carrier": {"mode": "cold", "reason": "cluster mode"}, "capacity": {}, "reduced_to_executors": None}


def first_event(trigger: RegionApplicationTrigger) -> dict[str, Any]:
    async def one() -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(one())


@pytest.fixture
def conn_id(manager: FakeManager, monkeypatch: pytest.MonkeyPatch) -> str:  # noqa: F811
    extra = {"master_webui_url": manager.url, "deploy_mode": "cluster", "total_cores": 4, "total_memory": "8g"}
    conn = {"conn_type": "finegrained_spark", "host": "spark://127.0.0.1:7077", "extra": extra}
    monkeypatch.setenv("AIRFLOW_CONN_FG_REGION_APP", json.dumps(conn))
    return "fg_region_app"


def test_serialize_round_trips_and_holds_no_settings(conn_id: str) -> None:
    trigger = RegionApplicationTrigger(conn_id, HANDLE.to_dict(), FACTS, poll_interval=0.1)
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_provider_finegrained.triggers.region_application.RegionApplicationTrigger"
    assert RegionApplicationTrigger(**kwargs).serialize() == (classpath, kwargs)
    # Only the connection's id travels (to the database): its settings and secrets are read in the triggerer.
    assert set(kwargs) == {
        "conn_id",
        "handle",
        "facts",
        "poll_interval",
        "unknown_timeout",
        "not_before",
        "submit_timeout",
    }


def test_fires_once_the_driver_has_ended(conn_id: str, manager: FakeManager) -> None:  # noqa: F811
    manager.drivers[DRIVER_ID] = "RUNNING"
    threading.Timer(0.5, lambda: manager.drivers.update({DRIVER_ID: "FINISHED"})).start()
    started = time.monotonic()
    event = first_event(RegionApplicationTrigger(conn_id, HANDLE.to_dict(), FACTS, poll_interval=0.1))
    assert 0.4 < time.monotonic() - started < 10
    assert event == {
        "status": "succeeded",
        "detail": f"driver {DRIVER_ID} is FINISHED",
        "handle": HANDLE.to_dict(),
        "facts": FACTS,
    }
    assert len(manager.requests) >= 3  # it asked while the driver ran


def test_an_application_that_ended_at_once_is_reported_after_the_floor(conn_id: str, manager: FakeManager) -> None:  # noqa: F811
    # Ended before the first look, yet the event waits for the floor (triggers/settle.py): resuming the task
    # within a second of the deferral is what Airflow 3.3's scheduler can fail on a stale exit event.
    manager.drivers[DRIVER_ID] = "FINISHED"
    started = time.monotonic()
    trigger = RegionApplicationTrigger(conn_id, HANDLE.to_dict(), FACTS, poll_interval=0.1, not_before=time.time() + 1)
    assert first_event(trigger)["status"] == "succeeded"
    assert 0.9 <= time.monotonic() - started < 10


@pytest.mark.parametrize(("driver_state", "status"), [("FAILED", "failed"), ("ERROR", "failed"), ("KILLED", "killed")])
def test_fires_with_how_the_driver_ended(conn_id: str, manager: FakeManager, driver_state: str, status: str) -> None:  # noqa: F811
    manager.drivers[DRIVER_ID] = driver_state
    event = first_event(RegionApplicationTrigger(conn_id, HANDLE.to_dict(), FACTS, poll_interval=0.1))
    assert event["status"] == status


def test_gives_up_after_the_master_could_not_say_for_too_long(conn_id: str, manager: FakeManager) -> None:  # noqa: F811
    # The master does not know the driver (it was restarted, or dropped it): unknown, until the timeout.
    started = time.monotonic()
    trigger = RegionApplicationTrigger(conn_id, HANDLE.to_dict(), FACTS, poll_interval=0.1, unknown_timeout=0.5)
    event = first_event(trigger)
    assert 0.5 <= time.monotonic() - started < 10
    assert event["status"] == "unknown"
    assert f"does not know {DRIVER_ID} (for 0.5 s)" in event["detail"]


def test_a_handle_it_cannot_follow_fires_unknown_at_once(conn_id: str) -> None:
    event = first_event(RegionApplicationTrigger(conn_id, {"launcher": "standalone"}, FACTS))
    assert event["status"] == "unknown"
    assert event["detail"].startswith("cannot follow the application: launch handle: app_name, try_number missing")


def test_a_users_kill_of_the_deferred_task_kills_the_application(
    manager: FakeManager,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow_provider_finegrained.launchers.base import LaunchHandle

    app_id = "application_1326821518301_0005"
    manager.apps[app_id] = ("RUNNING", "UNDEFINED")
    extra = {"yarn_resourcemanager_url": manager.url, "deploy_mode": "cluster", "total_cores": 4, "total_memory": "8g"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_FG_YARN_APP", json.dumps({"conn_type": "finegrained_spark", "host": "yarn", "extra": extra})
    )
    handle = LaunchHandle("yarn", "a", application_id=app_id, master="yarn", deploy_mode="cluster", try_number=1)
    asyncio.run(RegionApplicationTrigger("fg_yarn_app", handle.to_dict(), FACTS).on_kill())
    assert ("PUT", f'/ws/v1/cluster/apps/{app_id}/state {{"state": "KILLED"}}') in manager.requests
    assert manager.apps[app_id] == ("KILLED", "KILLED")


def test_submit_timeout_of_a_deferred_region_kills_its_application_and_fires_timeout(
    manager: FakeManager,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from airflow_provider_finegrained.launchers.base import LaunchHandle

    app_id = "application_1326821518301_0006"
    manager.apps[app_id] = ("ACCEPTED", "UNDEFINED")  # a queue that never admits it
    extra = {"yarn_resourcemanager_url": manager.url, "deploy_mode": "cluster", "total_cores": 4, "total_memory": "8g"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_FG_YARN_APP", json.dumps({"conn_type": "finegrained_spark", "host": "yarn", "extra": extra})
    )
    # Submitted an hour ago with a submit_timeout of a minute: due at the first look.
    submitted = time.time() - 3600
    handle = LaunchHandle(
        "yarn", "a", application_id=app_id, master="yarn", deploy_mode="cluster", try_number=1, submitted_at=submitted
    )
    trigger = RegionApplicationTrigger("fg_yarn_app", handle.to_dict(), FACTS, poll_interval=0.1, submit_timeout=60)
    event = first_event(trigger)
    assert event["status"] == "timeout"
    assert event["detail"].startswith(f"application {app_id} was still ")
    assert "ACCEPTED" in event["detail"]
    assert ("PUT", f'/ws/v1/cluster/apps/{app_id}/state {{"state": "KILLED"}}') in manager.requests
    assert manager.apps[app_id] == ("KILLED", "KILLED")


def test_without_submit_timeout_a_deferred_region_is_followed_until_it_ends(
    conn_id: str,
    manager: FakeManager,  # noqa: F811
) -> None:
    manager.drivers[DRIVER_ID] = "FINISHED"
    old = {**HANDLE.to_dict(), "submitted_at": time.time() - 3600}
    assert first_event(RegionApplicationTrigger(conn_id, old, FACTS, poll_interval=0.1))["status"] == "succeeded"
