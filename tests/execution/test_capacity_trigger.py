"""The capacity trigger: serializes for the triggerer, fires when the request fits, gives up at the deadline."""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_finegrained.capacity import Reservation, ReservationLedger
from airflow_provider_finegrained.execution.capacity_gate import CapacitySource
from airflow_provider_finegrained.planning.capacity import ExecutorRequest
from airflow_provider_finegrained.storage.filesystem import remove
from airflow_provider_finegrained.triggers.capacity import CapacityTrigger, request_to_dict
from tests.conftest import S3_BUCKET, S3_SECRET

GiB = 2**30
REQUEST = ExecutorRequest(executors=2, cores=2, memory=4 * GiB, parallelism=4, min_parallelism=2, slots_per_executor=2)


def first_event(trigger: CapacityTrigger) -> dict[str, Any]:
    async def one() -> dict[str, Any]:
        async for event in trigger.run():
            return dict(event.payload)
        raise AssertionError("the trigger ended without an event")

    return asyncio.run(one())


def trigger_for(ledger: Path, cores: int, deadline_s: float) -> CapacityTrigger:
    source = CapacitySource("declared", cores=cores, memory=64 * GiB, label="declared", ledger_folder=str(ledger))
    return CapacityTrigger(source.to_dict(), request_to_dict(REQUEST), time.time() + deadline_s, 0.1, since=100.0)


def test_serialize_round_trips() -> None:
    trigger = trigger_for(Path("/tmp/ledger"), 4, 60)
    classpath, kwargs = trigger.serialize()
    assert classpath == "airflow_provider_finegrained.triggers.capacity.CapacityTrigger"
    assert CapacityTrigger(**kwargs).serialize() == (classpath, kwargs)


def test_fires_available_when_the_request_fits(tmp_path: Path) -> None:
    event = first_event(trigger_for(tmp_path, cores=4, deadline_s=30))
    assert event["status"] == "available"
    assert "running as planned: 2 executor(s) of 2 core(s), 4.0 GiB" in event["message"]
    assert event["waited"]["since"] == 100.0


def test_a_reservation_in_the_ledger_keeps_it_waiting_until_the_deadline(tmp_path: Path) -> None:
    with ReservationLedger(tmp_path).locked() as view:
        view.add(Reservation(key="other", app_name="other", executors=1, executor_cores=3, executor_memory=GiB))
    started = time.monotonic()
    event = first_event(trigger_for(tmp_path, cores=4, deadline_s=1.0))
    assert event["status"] == "timeout"
    assert 0.9 <= time.monotonic() - started < 10
    assert "not enough free resources: asked for 2 executor(s) of 2 core(s), 4.0 GiB" in event["message"]
    assert "free: 1 core(s)" in event["message"]


def test_a_request_no_worker_can_hold_is_reported_at_once(tmp_path: Path) -> None:
    event = first_event(trigger_for(tmp_path, cores=1, deadline_s=30))
    assert event["status"] == "impossible"
    assert "no worker can ever hold one executor of 2 core(s)" in event["message"]


def test_the_first_look_waits_for_its_floor_after_the_deferral(tmp_path: Path) -> None:
    # Free capacity at once, but the floor (triggers/settle.py) holds the event back: Airflow's scheduler
    # must take the deferring try's exit before the task is resumed.
    source = CapacitySource("declared", cores=4, memory=64 * GiB, label="declared", ledger_folder=str(tmp_path))
    started = time.monotonic()
    trigger = CapacityTrigger(
        source.to_dict(), request_to_dict(REQUEST), time.time() + 30, 0.1, since=100.0, not_before=time.time() + 1.0
    )
    assert trigger.serialize()[1]["not_before"] == trigger.not_before
    assert first_event(trigger)["status"] == "available"
    assert 0.9 <= time.monotonic() - started < 10


# --- a ledger on shared storage: the options (secrets) are resolved in the triggerer, from the connection ---------


def shared_ledger_trigger(
    monkeypatch: pytest.MonkeyPatch, root: str, extra: dict[str, Any]
) -> tuple[CapacityTrigger, CapacitySource]:
    """A trigger whose payload names the connection ``fg_ledger`` (storage root ``root``) and no storage option;
    one region of 3 cores already reserved in that root's ledger, on a declared capacity of 4 cores."""
    from airflow_provider_finegrained.execution.capacity_gate import capacity_source
    from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook

    conn = {"conn_type": "finegrained_spark", "host": "local[2]", "extra": {"storage_root": root, **extra}}
    monkeypatch.setenv("AIRFLOW_CONN_FG_LEDGER", json.dumps(conn))
    hook = FineGrainedSparkHook("fg_ledger")
    ledger_folder = capacity_source(hook.get_settings()).ledger_folder
    source = CapacitySource(
        "declared", cores=4, memory=64 * GiB, label="declared", ledger_folder=ledger_folder, conn_id="fg_ledger"
    )
    ledger = source.with_storage_options(hook.storage_options()).ledger()
    assert ledger is not None
    with ledger.locked() as view:
        view.add(Reservation(key="other", app_name="other", executors=1, executor_cores=3, executor_memory=GiB))
    trigger = CapacityTrigger(source.to_dict(), request_to_dict(REQUEST), time.time() + 1.0, 0.1, since=100.0)
    return trigger, source.with_storage_options(hook.storage_options())


def test_a_reservation_on_s3_keeps_the_trigger_waiting(monkeypatch: pytest.MonkeyPatch, moto_endpoint: str) -> None:
    lake = {
        "conn_type": "aws",
        "login": "moto-access-key",
        "password": S3_SECRET,
        "extra": {"endpoint_url": moto_endpoint, "region_name": "eu-west-1"},
    }
    monkeypatch.setenv("AIRFLOW_CONN_FG_LAKE", json.dumps(lake))
    root = f"s3://{S3_BUCKET}/trigger-tests/{uuid.uuid4().hex[:12]}"
    trigger, source = shared_ledger_trigger(monkeypatch, root, {"storage_conn_id": "fg_lake"})
    try:
        assert S3_SECRET not in json.dumps(trigger.serialize())
        event = first_event(trigger)
        assert event["status"] == "timeout"
        assert "free: 1 core(s)" in event["message"]  # the reservation on S3 was read with the connection's keys
    finally:
        remove(root, source.storage_options)


@pytest.mark.hadoop
def test_a_reservation_on_hdfs_keeps_the_trigger_waiting(monkeypatch: pytest.MonkeyPatch, hadoop_cluster: Any) -> None:
    # No storage connection: the NameNode's web address comes from the connection's hadoop_conf_dir alone.
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)
    root = hadoop_cluster.storage_root(f"/trigger-tests/{uuid.uuid4().hex[:12]}")
    trigger, source = shared_ledger_trigger(monkeypatch, root, {"hadoop_conf_dir": hadoop_cluster.conf_dir})
    try:
        event = first_event(trigger)
        assert event["status"] == "timeout"
        assert "free: 1 core(s)" in event["message"]
    finally:
        remove(root, source.storage_options)


def test_a_full_application_master_limit_keeps_it_waiting(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The same reading as the gate's (tests/execution/test_capacity_gate.py): alice's masters hold 2 of the
    # 2.5 GiB one user's may; a master of 896 MiB is 1 GiB in the RM's 512 MiB steps, so it never fires.
    from tests.capacity.test_sources import rm_with_am_limits

    with rm_with_am_limits() as url:
        monkeypatch.setenv("HADOOP_USER_NAME", "alice")
        source = CapacitySource("yarn", (url,), queue="default", ledger_folder=str(tmp_path))
        request = ExecutorRequest(
            executors=2, cores=1, memory=1408 * 2**20, parallelism=2, master_cores=1, master_memory=896 * 2**20
        )
        trigger = CapacityTrigger(source.to_dict(), request_to_dict(request), time.time() + 1.0, 0.1, since=100.0)
        event = first_event(trigger)
        assert event["status"] == "timeout"
        assert (
            "user alice's ApplicationMasters may hold 2.5 GiB, 2.0 GiB held, this region's needs 1.0 GiB"
            in (event["message"])
        )
