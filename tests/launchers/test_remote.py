"""Launch handles that outlive their process, and following an application from them alone.

The cluster managers are HTTP servers on 127.0.0.1 answering in the real shapes: a standalone master's
``/json/`` (its ``activedrivers``/``completeddrivers``) and YARN's Cluster Application API.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from airflow_provider_finegrained.launchers.base import LaunchHandle, reattach_refusal
from airflow_provider_finegrained.launchers.remote import RemoteApplication
from airflow_provider_finegrained.settings import ConnectionSettings
from tests.loopback_http import JsonHandler, serving

DRIVER_ID = "driver-20261124030000-0007"
APP_ID = "application_1326821518301_0005"

HANDLE = LaunchHandle(
    launcher="standalone",
    app_name="dag.region-1 [run try 1]",
    driver_id=DRIVER_ID,
    application_id="app-20261124030001-0003",
    master="spark://127.0.0.1:7077",
    deploy_mode="cluster",
    region_folder="/data/dag/run/_regions/region-1/try=1",
    try_number=1,
    submitted_at=1700000000.5,
)


@dataclass
class FakeManager:
    """What the fake cluster manager answers: each driver's state, each YARN application's state/finalStatus."""

    url: str = ""
    drivers: dict[str, str] = field(default_factory=dict)
    apps: dict[str, tuple[str, str]] = field(default_factory=dict)
    requests: list[tuple[str, str]] = field(default_factory=list)


@pytest.fixture
def manager() -> Iterator[FakeManager]:
    fake = FakeManager()

    class Handler(JsonHandler):
        def do_GET(self) -> None:
            path = self.path.split("?")[0]
            fake.requests.append(("GET", path))
            if path == "/json/":
                done = {"FINISHED", "FAILED", "ERROR", "KILLED"}
                listed = [{"id": d, "state": s, "worker": "worker-1"} for d, s in fake.drivers.items()]
                self._answer(
                    200,
                    {
                        "url": "spark://127.0.0.1:7077",
                        "workers": [],
                        "activedrivers": [d for d in listed if d["state"] not in done],
                        "completeddrivers": [d for d in listed if d["state"] in done],
                    },
                )
            elif path.startswith("/ws/v1/cluster/apps/") and path.rsplit("/", 1)[1] in fake.apps:
                app_id = path.rsplit("/", 1)[1]
                state, final = fake.apps[app_id]
                self._answer(200, {"app": {"id": app_id, "state": state, "finalStatus": final, "diagnostics": ""}})
            else:
                self._answer(404, {"RemoteException": {"message": "not found"}})

        def do_PUT(self) -> None:
            path = self.path.split("?")[0]
            length = int(self.headers.get("Content-Length") or 0)
            fake.requests.append(("PUT", f"{path} {self.rfile.read(length).decode()}"))
            app_id = path.removeprefix("/ws/v1/cluster/apps/").removesuffix("/state")
            if app_id not in fake.apps:
                self._answer(404, {"RemoteException": {"message": "not found"}})
                return
            fake.apps[app_id] = ("KILLED", "KILLED")
            self._answer(200, {"state": "KILLED"})

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(Handler) as fake.url:
        yield fake


def standalone_settings(webui: str, **extra: Any) -> ConnectionSettings:
    fields = {"master_webui_url": webui, "deploy_mode": "cluster", "total_cores": 4, "total_memory": "8g", **extra}
    return ConnectionSettings.from_connection_fields("spark://127.0.0.1:7077", fields, airflow_home="/srv/airflow")


def yarn_settings(rm_url: str | None) -> ConnectionSettings:
    fields: dict[str, Any] = {"deploy_mode": "cluster", "total_cores": 4, "total_memory": "8g"}
    if rm_url:
        fields["yarn_resourcemanager_url"] = rm_url
    return ConnectionSettings.from_connection_fields("yarn", fields, airflow_home="/srv/airflow")


# -- the handle -------------------------------------------------------------------------------------


def test_a_handle_round_trips_through_json() -> None:
    data = json.loads(json.dumps(HANDLE.to_dict()))
    assert LaunchHandle.from_dict(data) == HANDLE
    assert data["try_number"] == 1 and data["region_folder"].endswith("try=1")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"app_name": "a", "try_number": 1}, "launch handle: launcher missing"),
        ({"launcher": "yarn", "app_name": "a"}, "launch handle: try_number missing"),
        ({"launcher": "yarn", "app_name": "a", "try_number": "1"}, "try_number '1' is not a try number"),
        ({"launcher": "yarn", "app_name": "a", "try_number": 0}, "try_number 0 is not a try number"),
        ({"launcher": "yarn", "app_name": "a", "try_number": True}, "try_number True is not a try number"),
        (["launcher"], "launch handle: expected a mapping, got list"),
    ],
)
def test_a_bad_stored_handle_is_refused_naming_what_is_wrong(data: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LaunchHandle.from_dict(data)


@pytest.mark.parametrize(
    ("launcher", "ids", "identified"),
    [
        ("standalone", {}, False),
        ("standalone", {"application_id": "app-1"}, False),  # the master is asked by driver id
        ("standalone", {"driver_id": DRIVER_ID}, True),
        ("yarn", {"driver_id": DRIVER_ID}, False),
        ("yarn", {"application_id": APP_ID}, True),
        ("kubernetes", {}, False),
        ("kubernetes", {"submission_id": "spark:dag-region-1-driver"}, True),
    ],
)
def test_which_ids_identify_an_application(launcher: str, ids: dict[str, str], identified: bool) -> None:
    assert LaunchHandle(launcher, "a", **ids).identified() is identified


@pytest.mark.parametrize(
    ("launcher", "deploy_mode", "reason"),
    [
        ("standalone", "cluster", None),
        ("yarn", "cluster", None),
        ("kubernetes", "cluster", None),
        ("standalone", "client", "in client deploy mode the driver is a child of the task and dies with it"),
        ("local", "client", "the local launcher runs the driver as a child of the task"),
        ("warm", "client", "a warm region runs as Spark Connect sessions in the pool"),
    ],
)
def test_only_cluster_deploy_mode_can_outlive_the_task(launcher: str, deploy_mode: str, reason: str | None) -> None:
    refusal = reattach_refusal(launcher, deploy_mode)
    assert refusal == reason if reason is None else refusal is not None and refusal.startswith(reason)


def test_a_handle_that_cannot_be_followed_is_refused() -> None:
    settings = standalone_settings("http://127.0.0.1:9")
    with pytest.raises(ValueError, match="in client deploy mode the driver is a child of the task"):
        RemoteApplication(settings, LaunchHandle("standalone", "a", driver_id=DRIVER_ID, deploy_mode="client"))
    with pytest.raises(ValueError, match="the standalone handle has no id the cluster manager knows it by"):
        RemoteApplication(settings, LaunchHandle("standalone", "a", deploy_mode="cluster"))


# -- status from the cluster manager ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("driver_state", "state"),
    [
        ("SUBMITTED", "pending"),
        ("RELAUNCHING", "pending"),
        ("RUNNING", "running"),
        ("FINISHED", "succeeded"),
        ("FAILED", "failed"),
        ("ERROR", "failed"),
        ("KILLED", "killed"),
        ("UNKNOWN", "unknown"),
    ],
)
def test_standalone_status_comes_from_the_masters_json(manager: FakeManager, driver_state: str, state: str) -> None:
    manager.drivers[DRIVER_ID] = driver_state
    status = RemoteApplication(standalone_settings(manager.url), HANDLE).status()
    assert (status.state, status.driver_id, status.detail) == (
        state,
        DRIVER_ID,
        f"driver {DRIVER_ID} is {driver_state}",
    )
    assert manager.requests == [("GET", "/json/")]


def test_standalone_status_of_a_driver_the_master_forgot_or_an_unreachable_master(manager: FakeManager) -> None:
    status = RemoteApplication(standalone_settings(manager.url), HANDLE).status()
    assert status.state == "unknown" and f"does not know {DRIVER_ID}" in status.detail
    # Nothing listens on port 9 of loopback: "unknown", never a verdict on the application.
    status = RemoteApplication(standalone_settings("http://127.0.0.1:9"), HANDLE).status()
    assert status.state == "unknown" and status.detail.startswith("could not ask:")


def test_wait_polls_until_the_application_ends(manager: FakeManager) -> None:
    manager.drivers[DRIVER_ID] = "RUNNING"
    app = RemoteApplication(standalone_settings(manager.url), HANDLE)
    assert app.wait(poll_s=0.05, timeout_s=0.3).state == "running"  # the timeout returns the last status
    asked = len(manager.requests)
    assert asked >= 3
    manager.drivers[DRIVER_ID] = "FINISHED"
    assert app.wait(poll_s=0.05).state == "succeeded"


@pytest.mark.parametrize(
    ("yarn_state", "final_status", "state"),
    [
        ("ACCEPTED", "UNDEFINED", "pending"),
        ("RUNNING", "UNDEFINED", "running"),
        ("FINISHED", "SUCCEEDED", "succeeded"),
        ("FINISHED", "FAILED", "failed"),  # a driver that raised still ends FINISHED
        ("FAILED", "FAILED", "failed"),
        ("KILLED", "KILLED", "killed"),
    ],
)
def test_yarn_status_comes_from_the_resource_manager(
    manager: FakeManager, yarn_state: str, final_status: str, state: str
) -> None:
    manager.apps[APP_ID] = (yarn_state, final_status)
    handle = LaunchHandle("yarn", "a", application_id=APP_ID, master="yarn", deploy_mode="cluster", try_number=2)
    status = RemoteApplication(yarn_settings(manager.url), handle).status()
    assert (status.state, status.application_id) == (state, APP_ID)
    assert manager.requests == [("GET", f"/ws/v1/cluster/apps/{APP_ID}")]


def test_a_yarn_application_is_killed_through_the_resource_manager(manager: FakeManager) -> None:
    manager.apps[APP_ID] = ("RUNNING", "UNDEFINED")
    handle = LaunchHandle("yarn", "a", application_id=APP_ID, master="yarn", deploy_mode="cluster", try_number=1)
    app = RemoteApplication(yarn_settings(manager.url), handle)
    assert app.kill() == f"YARN application {APP_ID}: KILLED"
    assert manager.requests == [("PUT", f'/ws/v1/cluster/apps/{APP_ID}/state {{"state": "KILLED"}}')]
    assert app.status().state == "killed"


def test_yarn_without_a_resource_manager_url_cannot_say() -> None:
    handle = LaunchHandle("yarn", "a", application_id=APP_ID, master="yarn", deploy_mode="cluster", try_number=1)
    app = RemoteApplication(yarn_settings(None), handle)
    status = app.status()
    assert status.state == "unknown" and "set yarn_resourcemanager_url" in status.detail
    assert f"yarn application -kill {APP_ID}" in app.kill()
