"""The reservation ledger on shared storage (a real S3 API on moto, the loopback HDFS): the lease lock, real
processes contending for it, expired and live leases, and another host's reservations."""

from __future__ import annotations

import multiprocessing
import os
import socket
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

from airflow_provider_finegrained.capacity import Reservation, ReservationLedger
from airflow_provider_finegrained.capacity.lease import Lease, LeaseLock
from airflow_provider_finegrained.capacity.ledger import LEASE_FILE
from airflow_provider_finegrained.storage.filesystem import (
    create_exclusive,
    exists,
    list_files,
    read_bytes,
    read_json,
    remove,
)
from airflow_provider_finegrained.storage.locations import join
from tests.capacity.ledger_workers import ROUNDS, append_under_the_lock
from tests.conftest import S3_BUCKET, s3_options

GiB = 2**30


@dataclass(frozen=True)
class Shared:
    """A fresh ledger folder on shared storage and the fsspec options that reach it."""

    kind: str
    location: str
    options: dict[str, Any]

    def ledger(self, **kwargs: Any) -> ReservationLedger:
        return ReservationLedger(self.location, storage_options=self.options, **kwargs)

    @property
    def lease(self) -> str:
        return join(self.location, LEASE_FILE)


@pytest.fixture(params=["s3", pytest.param("hdfs", marks=pytest.mark.hadoop)])
def shared(request: pytest.FixtureRequest) -> Iterator[Shared]:
    unique = uuid.uuid4().hex[:12]
    if request.param == "hdfs":
        cluster = request.getfixturevalue("hadoop_cluster")
        options = {"webhdfs_url": cluster.namenode_http_url}
        store = Shared("hdfs", cluster.storage_root(f"/ledger-tests/{unique}"), options)
    else:
        endpoint = request.getfixturevalue("moto_endpoint")
        store = Shared("s3", f"s3://{S3_BUCKET}/ledger-tests/{unique}", s3_options(endpoint))
    yield store
    remove(store.location, store.options)


def held(key: str, **kwargs: Any) -> Reservation:
    return Reservation(key, f"app-{key}", 2, 1, GiB, **kwargs)


def test_add_list_remove(shared: Shared, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # a URL taken for a local path would show up here
    ledger = shared.ledger()
    first, second = held("dag/r/a/1"), held("dag/r/b/1")
    with ledger.locked() as view:
        assert Lease.from_bytes(read_bytes(shared.lease, shared.options)).pid == os.getpid()
        view.add(first)
        view.add(second)
        assert view.reservations() == [first, second]
        replaced = Reservation("dag/r/a/1", "app-dag/r/a/1", 4, 1, GiB, created_at=first.created_at)
        view.add(replaced)  # same key: a retry's new grant replaces the old one
        assert view.reservations() == [replaced, second]
    assert not exists(shared.lease, shared.options)  # released
    names = sorted(list_files(shared.location, shared.options))
    assert [n.startswith(("dag_r_a_1-", "dag_r_b_1-")) and n.endswith(".json") for n in names] == [True, True]
    assert ledger.release("dag/r/a/1") is True
    assert ledger.release("dag/r/a/1") is False  # idempotent
    with ledger.locked() as view:
        assert view.reservations() == [second]
    assert list(tmp_path.iterdir()) == []


# --- real processes contending ----------------------------------------------------------------------------------


def test_processes_contending_for_the_lock_get_it_one_at_a_time(shared: Shared) -> None:
    context = multiprocessing.get_context("spawn")
    log = join(shared.location + "-log", "appended.json")
    start = context.Barrier(3)
    workers = [
        context.Process(target=append_under_the_lock, args=(shared.location, shared.options, f"p{i}", log, start))
        for i in range(3)
    ]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(180)
        assert [w.exitcode for w in workers] == [0, 0, 0]
        lines = read_json(log, shared.options)
        assert sorted(lines) == sorted(f"p{i}:{r}" for i in range(3) for r in range(ROUNDS))  # none lost
        assert not exists(shared.lease, shared.options)
    finally:
        remove(shared.location + "-log", shared.options)


# --- leases -----------------------------------------------------------------------------------------------------


def test_an_expired_lease_is_broken(shared: Shared) -> None:
    dead = Lease("elsewhere", 4242, "dead-holder", time.time() - 120, time.time() - 60)
    create_exclusive(shared.lease, dead.to_bytes(), shared.options)
    started = time.monotonic()
    with shared.ledger().locked(timeout_s=10) as view:
        assert Lease.from_bytes(read_bytes(shared.lease, shared.options)).token != "dead-holder"
        view.add(held("dag/r/a/1"))
    assert time.monotonic() - started < 10
    assert not exists(shared.lease, shared.options)


def test_a_live_lease_is_not_broken(shared: Shared) -> None:
    live = Lease("elsewhere", 4242, "live-holder", time.time(), time.time() + 60)
    create_exclusive(shared.lease, live.to_bytes(), shared.options)
    started = time.monotonic()
    with pytest.raises(TimeoutError) as raised, shared.ledger().locked(timeout_s=1.0):
        pass
    assert time.monotonic() - started >= 1.0
    message = str(raised.value)
    assert message.startswith(f"could not lock the capacity ledger {shared.lease} within 1 s")
    assert "held by pid 4242 on elsewhere until" in message
    assert read_bytes(shared.lease, shared.options) == live.to_bytes()  # untouched


def test_release_does_not_remove_another_holders_lock(shared: Shared) -> None:
    # Held past its lease (1 s): a waiter breaks it, and the late holder neither writes nor removes the new lock.
    ledger = shared.ledger(lease_s=1.0)
    with ledger.locked() as view:
        time.sleep(1.2)
        other = LeaseLock(shared.lease, shared.options).acquire(timeout_s=10)
        with pytest.raises(RuntimeError, match="lease ran out while it was held"):
            view.add(held("dag/r/late/1"))
    assert Lease.from_bytes(read_bytes(shared.lease, shared.options)).token == other.token
    mine = LeaseLock(shared.lease, shared.options)
    stale = Lease(socket.gethostname(), os.getpid(), "not-the-token", time.time(), time.time() + 60)
    assert mine.release(stale) is False
    assert LeaseLock(shared.lease, shared.options).release(other) is True
    assert not exists(shared.lease, shared.options)


# --- another host's reservations --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "age_s", "kept"),
    [
        pytest.param("elsewhere", 5, True, id="other-host-young"),
        pytest.param("elsewhere", 120, False, id="other-host-past-remote-max-age"),
        # This host's holder is checked by its pid: alive, it keeps its reservation past remote_max_age_s.
        pytest.param("this", None, True, id="this-host-live-holder"),
    ],
)
def test_another_hosts_reservation_is_stale_after_remote_max_age(
    shared: Shared, host: str, age_s: float | None, kept: bool
) -> None:
    if age_s is None:  # as old as this process (a reservation younger than its holder is a reused pid's)
        created_at = psutil.Process().create_time()
        assert time.time() - created_at > 1
        remote_max_age_s = 1.0
    else:
        created_at, remote_max_age_s = time.time() - age_s, 60.0
    reservation = held(
        "dag/r/h/1",
        host=socket.gethostname() if host == "this" else host,
        pid=os.getpid() if host == "this" else 1,
        created_at=created_at,
    )
    ledger = shared.ledger(remote_max_age_s=remote_max_age_s)
    with ledger.locked() as view:
        view.add(reservation)
    with ledger.locked() as view:
        assert view.reservations() == ([reservation] if kept else [])
    assert len(list_files(shared.location, shared.options)) == (1 if kept else 0)  # a stale one is deleted


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"lease_s": 0}, "lease_s must be > 0, got 0"),
        ({"lease_s": -5.0}, "lease_s must be > 0, got -5.0"),
        ({"remote_max_age_s": 0}, "remote_max_age_s must be > 0, got 0"),
        ({"max_age_s": -1}, "max_age_s must be > 0, got -1"),
    ],
)
def test_bad_limits_are_refused(kwargs: dict[str, float], error: str) -> None:
    with pytest.raises(ValueError, match=error):
        ReservationLedger("s3://bucket/ledger", **kwargs)
    if "lease_s" in kwargs:
        with pytest.raises(ValueError, match="lease_s must be > 0"):
            LeaseLock("s3://bucket/ledger/.lease", lease_s=kwargs["lease_s"])
