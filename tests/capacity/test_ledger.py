"""The reservation ledger: hand-worked subtraction, real processes racing under the lock, stale holders."""

from __future__ import annotations

import json
import multiprocessing
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from multiprocessing.synchronize import Barrier
from pathlib import Path

import psutil
import pytest

from airflow_provider_finegrained.capacity import (
    ClusterCapacity,
    Reservation,
    ReservationLedger,
    declared_capacity,
    subtract,
)
from airflow_provider_finegrained.planning import ExecutorRequest, WorkerCapacity, decide_capacity
from airflow_provider_finegrained.planning.capacity import MasterLimit

GiB = 2**30
# Worker A: 4 cores, 8 GiB, 2 GPUs; worker B: 2 cores, 4 GiB. "running-app" is registered with the cluster.
CLUSTER = ClusterCapacity(
    (
        WorkerCapacity(4, 8 * GiB, 2, total_cores=4, total_memory=8 * GiB, total_gpus=2),
        WorkerCapacity(2, 4 * GiB, 0, total_cores=2, total_memory=4 * GiB, total_gpus=0),
    ),
    "test cluster",
    frozenset({"running-app"}),
)


def reservation(app: str, executors: int, cores: int, memory: int, gpus: float = 0, key: str = "") -> Reservation:
    return Reservation(key or f"dag/run/{app}/1", app, executors, cores, memory, gpus, created_at=time.time())


def free(capacity: ClusterCapacity) -> list[tuple[int, int, float]]:
    return [(w.free_cores, w.free_memory, w.free_gpus) for w in capacity.workers]


@pytest.mark.parametrize(
    ("reservations", "expected"),
    [
        pytest.param([], [(4, 8 * GiB, 2), (2, 4 * GiB, 0)], id="none"),
        # spreadOut: one executor on A (most free cores), one on B.
        pytest.param([reservation("p", 2, 1, GiB)], [(3, 7 * GiB, 2), (1, 3 * GiB, 0)], id="one-pending"),
        # The cluster already counts running-app's executors: nothing to subtract.
        pytest.param([reservation("running-app", 2, 1, GiB)], [(4, 8 * GiB, 2), (2, 4 * GiB, 0)], id="already-active"),
        # 3 x (2 cores, 2 GiB): round 1 A and B, round 2 only A still fits.
        pytest.param([reservation("p", 3, 2, 2 * GiB)], [(0, 4 * GiB, 2), (0, 2 * GiB, 0)], id="two-rounds"),
        # 5 x (2 cores, 2 GiB): 3 placed as above; the 2 left claim 4 cores (none left) and 4 GiB (all of A's).
        pytest.param([reservation("p", 5, 2, 2 * GiB)], [(0, 0, 2), (0, 2 * GiB, 0)], id="more-than-free"),
        # GPU executors only fit A: 2 rounds on A, B untouched.
        pytest.param([reservation("g", 2, 1, GiB, gpus=1)], [(2, 6 * GiB, 0), (2, 4 * GiB, 0)], id="gpus"),
        # 5 cores fit no worker: it still claims 5 cores (A's 4, one of B's) and 1 GiB (from A).
        pytest.param([reservation("big", 1, 5, GiB)], [(0, 7 * GiB, 2), (1, 4 * GiB, 0)], id="fits-nowhere"),
        pytest.param(
            [reservation("running-app", 4, 1, GiB), reservation("p", 1, 2, 2 * GiB)],
            [(2, 6 * GiB, 2), (2, 4 * GiB, 0)],
            id="active-and-pending",
        ),
    ],
)
def test_subtract(reservations: list[Reservation], expected: list[tuple[int, int, float]]) -> None:
    result = subtract(CLUSTER, reservations)
    assert free(result) == expected
    assert all(c >= 0 and m >= 0 and g >= 0 for c, m, g in free(result))
    # Totals stay what the cluster has; only the free part shrinks.
    assert [(w.total_cores, w.total_memory) for w in result.workers] == [(4, 8 * GiB), (2, 4 * GiB)]
    assert result.active_apps == CLUSTER.active_apps


def test_subtract_says_so_in_the_source() -> None:
    assert subtract(CLUSTER, [reservation("running-app", 1, 1, GiB)]).source == "test cluster"
    pending = [reservation("p", 2, 1, GiB), reservation("q", 1, 1, GiB)]
    assert subtract(CLUSTER, pending).source == "test cluster; minus 3 executor(s) reserved by 2 pending region(s)"


def test_subtract_keeps_the_queue_master_limit_and_allocation_step() -> None:
    # A pending region's executors come off the workers; what the queue lets masters hold is the RM's to count.
    limit = MasterLimit("small", 2 * GiB, GiB)
    cluster = replace(CLUSTER, master_limit=limit, memory_step=512 * 2**20)
    result = subtract(cluster, [reservation("p", 2, 1, GiB)])
    assert free(result) == [(3, 7 * GiB, 2), (1, 3 * GiB, 0)]
    assert (result.master_limit, result.memory_step) == (limit, 512 * 2**20)


def test_pending_regions_hold_their_application_masters_in_their_queue() -> None:
    # 1 GiB of the queue's 2 GiB held; p's master (512 MiB) not yet counted by YARN, q's is in another queue,
    # and the running application's YARN counts already.
    cluster = replace(CLUSTER, master_limit=MasterLimit("small", 2 * GiB, GiB, "etl", GiB, 0))
    mine = replace(reservation("p", 1, 1, GiB), master_memory=512 * 2**20, queue="small")
    elsewhere = replace(reservation("q", 1, 1, GiB), master_memory=GiB, queue="default")
    running = replace(reservation("running-app", 1, 1, GiB), master_memory=GiB, queue="small")
    result = subtract(cluster, [mine, elsewhere, running])
    assert result.master_limit == MasterLimit("small", 2 * GiB, GiB + 512 * 2**20, "etl", GiB, 0)
    assert result.master_limit.refusal(GiB) is not None  # 1.5 + 1 GiB > 2 GiB: the next region waits
    assert subtract(CLUSTER, [mine]).master_limit is None  # no limit read (standalone, another scheduler)


def test_subtract_on_ties_keeps_cluster_order() -> None:
    """Equal free cores: the first listed worker takes the first executor."""
    two = ClusterCapacity((WorkerCapacity(2, 4 * GiB), WorkerCapacity(2, 4 * GiB)), "c")
    assert free(subtract(two, [reservation("p", 1, 1, GiB)])) == [(1, 3 * GiB, 0), (2, 4 * GiB, 0)]


# --- reservations on disk ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "error"),
    [
        pytest.param("[]", "a reservation is a JSON object", id="not-object"),
        pytest.param('{"key": "k"}', "reservation fields", id="missing-fields"),
        pytest.param(
            Reservation("k", "a", 1, 1, 1).to_json().replace('"executors": 1', '"executors": true'),
            "'executors' has the wrong type",
            id="bool-is-not-int",
        ),
        pytest.param(
            Reservation("k", "a", 1, 1, 1).to_json().replace('"executors": 1', '"executors": -1'),
            "negative amount",
            id="negative",
        ),
        pytest.param(
            Reservation("k", "a", 1, 1, 1).to_json().replace('"queue": ""', '"queue": 3'),
            "'queue' has the wrong type",
            id="queue-not-text",
        ),
        pytest.param(
            Reservation("k", "a", 1, 1, 1).to_json().replace('"master_memory": 0', '"master_memory": -1'),
            "negative amount",
            id="negative-master",
        ),
        pytest.param("{", "Expecting", id="not-json"),
    ],
)
def test_reservation_json_rejects(text: str, error: str) -> None:
    with pytest.raises(ValueError, match=error):
        Reservation.from_json(text)


def test_reservation_json_round_trip() -> None:
    original = Reservation("dag/run 1/region-a/2", "app-a", 3, 2, 2 * GiB + 384 * 2**20, 0.5)
    assert Reservation.from_json(original.to_json()) == original
    with_master = replace(original, master_memory=GiB, queue="root.etl")
    assert Reservation.from_json(with_master.to_json()) == with_master
    # An earlier version's reservation (no master, no queue) still counts its executors.
    earlier = {k: v for k, v in json.loads(with_master.to_json()).items() if k not in ("master_memory", "queue")}
    assert Reservation.from_json(json.dumps(earlier)) == original
    assert (original.host, original.pid) == (socket.gethostname(), os.getpid())
    assert json.loads(original.to_json())["key"] == "dag/run 1/region-a/2"


def test_add_remove_release(tmp_path: Path) -> None:
    ledger = ReservationLedger(tmp_path / "ledger")
    first, second = reservation("a", 1, 1, GiB, key="dag/r/a/1"), reservation("b", 2, 1, GiB, key="dag/r/b/1")
    with ledger.locked() as view:
        view.add(first)
        view.add(second)
        assert view.reservations() == [first, second]
        replaced = Reservation("dag/r/a/1", "a", 4, 1, GiB, created_at=first.created_at)
        view.add(replaced)  # same key: a retry's new grant replaces the old one
        assert view.reservations() == [replaced, second]
    names = sorted(p.name for p in (tmp_path / "ledger").iterdir())
    assert names[0] == ".lock"
    assert [n.startswith(("dag_r_a_1-", "dag_r_b_1-")) and n.endswith(".json") for n in names[1:]] == [True, True]
    assert ledger.release("dag/r/a/1") is True
    assert ledger.release("dag/r/a/1") is False  # idempotent
    with ledger.locked() as view:
        assert view.reservations() == [second]


def test_view_is_unusable_after_the_lock_is_released(tmp_path: Path) -> None:
    with ReservationLedger(tmp_path).locked() as view:
        pass
    with pytest.raises(RuntimeError, match="lock was released"):
        view.reservations()


def test_lock_is_exclusive_with_timeout(tmp_path: Path) -> None:
    """flock locks belong to an open file, so a second open in this same process contends like another process."""
    ledger = ReservationLedger(tmp_path)
    with ledger.locked():
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="could not lock the capacity ledger"), ledger.locked(timeout_s=0.3):
            pass
        assert time.monotonic() - started >= 0.3
    with ledger.locked(timeout_s=0.3) as view:
        assert view.reservations() == []


def test_foreign_files_are_left_alone(tmp_path: Path) -> None:
    (tmp_path / "other-format.json").write_text('{"version": 2}')
    with ReservationLedger(tmp_path).locked() as view:
        assert view.reservations() == []
    assert (tmp_path / "other-format.json").exists()


# --- stale holders ----------------------------------------------------------------------------------------------


def _reserve_and_exit(folder: str, key: str) -> None:
    with ReservationLedger(folder).locked() as view:
        view.add(Reservation(key, "app", 2, 1, GiB))


def test_reservation_of_an_exited_process_is_dropped(tmp_path: Path) -> None:
    child = multiprocessing.get_context("spawn").Process(target=_reserve_and_exit, args=(str(tmp_path), "dag/r/x/1"))
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert not psutil.pid_exists(child.pid or -1)
    (path,) = tmp_path.glob("*.json")
    assert Reservation.from_json(path.read_text()).pid == child.pid
    with ReservationLedger(tmp_path).locked() as view:
        assert view.reservations() == []
    assert not path.exists()  # deleted while under the lock


def test_reservation_of_a_zombie_is_dropped(tmp_path: Path) -> None:
    process = subprocess.Popen([sys.executable, "-c", "pass"])  # not waited for: exits into a zombie
    try:
        held = Reservation("dag/r/z/1", "app", 1, 1, GiB, pid=process.pid)
        deadline = time.monotonic() + 30
        while psutil.Process(process.pid).status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.05)
        with ReservationLedger(tmp_path).locked() as view:
            view.add(held)
            assert view.reservations() == []
    finally:
        process.wait()


@pytest.mark.parametrize(
    ("host", "pid", "age_s", "kept"),
    [
        pytest.param("this", "self", 0, True, id="live-holder"),
        # This process started before any reservation it makes: a holder younger than its reservation reused a pid.
        pytest.param("this", "self-reused", 10, False, id="pid-reused"),
        # Another machine's pid cannot be checked: kept until the age limit.
        pytest.param("other-host.example", "dead", 10, True, id="other-host"),
        pytest.param("other-host.example", "dead", 7200, False, id="other-host-too-old"),
        pytest.param("this", "self", 7200, False, id="live-but-too-old"),
    ],
)
def test_staleness(tmp_path: Path, host: str, pid: str, age_s: float, kept: bool) -> None:
    me = psutil.Process()
    created_at = time.time() - age_s
    if pid == "self-reused":
        created_at = me.create_time() - 60
    held = Reservation(
        "dag/r/s/1",
        "app",
        1,
        1,
        GiB,
        host=socket.gethostname() if host == "this" else host,
        pid=me.pid if pid.startswith("self") else 2**22 + 12345,  # above the default pid_max: never alive
        created_at=created_at,
    )
    with ReservationLedger(tmp_path, max_age_s=3600).locked() as view:
        view.add(held)
        assert view.reservations() == ([held] if kept else [])


# --- real processes racing --------------------------------------------------------------------------------------

TOTAL_CORES = 8
# Each region asks 3 executors of 2 cores (one task each), at least 2 tasks: two regions cannot both get 3.
REQUEST = ExecutorRequest(executors=3, cores=2, memory=2 * GiB, parallelism=6, min_parallelism=2)


def _region(folder: str, name: str, use_lock: bool, start: Barrier, done: Barrier, result: Path) -> None:
    """One region: read free capacity, decide, reserve; hold the reservation until every region has decided."""
    ledger = ReservationLedger(folder)
    cluster = declared_capacity(TOTAL_CORES, 64 * GiB, "declared")
    start.wait()
    if use_lock:
        with ledger.locked() as view:
            granted = _decide_and_reserve(cluster, view.reservations(), view.add, name)
    else:  # the same steps without the lock: what the ledger exists to prevent
        with ledger.locked() as view:
            seen = view.reservations()
        granted = _decide_and_reserve(cluster, seen, lambda r: _add_unlocked(ledger, r), name)
    result.write_text(str(granted))
    done.wait()  # a finished region's process would drop its reservation; keep it alive like a running task


def _decide_and_reserve(
    cluster: ClusterCapacity, seen: list[Reservation], add: Callable[[Reservation], None], name: str
) -> int:
    decision = decide_capacity(REQUEST, subtract(cluster, seen).workers)
    time.sleep(0.5)  # widen the window between deciding and recording, as a slow filesystem would
    if decision.can_run:
        add(Reservation(f"dag/run/{name}/1", name, decision.executors, REQUEST.cores, REQUEST.memory))
    return decision.executors


def _add_unlocked(ledger: ReservationLedger, held: Reservation) -> None:
    with ledger.locked() as view:
        view.add(held)


@pytest.mark.parametrize(("use_lock", "expected"), [(True, [0, 3]), (False, [3, 3])], ids=["locked", "unlocked"])
def test_racing_regions(tmp_path: Path, use_lock: bool, expected: list[int]) -> None:
    """Under the lock the second region sees the first's 3 executors (6 cores): 2 cores left = 1 task < min 2, so
    it waits. Without it, both read 8 free cores and both take 3 executors: 12 cores on an 8-core cluster."""
    context = multiprocessing.get_context("spawn")
    start, done = context.Barrier(2), context.Barrier(2)
    results = [tmp_path / f"region-{i}.txt" for i in range(2)]
    regions = [
        context.Process(
            target=_region, args=(str(tmp_path / "ledger"), f"region-{i}", use_lock, start, done, results[i])
        )
        for i in range(2)
    ]
    for region in regions:
        region.start()
    for region in regions:
        region.join(120)
    assert [r.exitcode for r in regions] == [0, 0]
    granted = sorted(int(path.read_text()) for path in results)
    assert granted == expected
    if use_lock:
        assert sum(granted) * REQUEST.cores <= TOTAL_CORES
