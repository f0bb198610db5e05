"""The run-time side of declarative resources: the region's minimum slots, its reduced profile and the two
admissions (the minimum resources' Spark settings are tests/execution/test_executor_lifecycle.py's)."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from airflow_provider_finegrained.capacity import ReservationLedger
from airflow_provider_finegrained.execution.capacity_gate import (
    CapacityImpossible,
    CapacitySource,
    CapacityWait,
    acquire,
    reduced_profile,
)
from airflow_provider_finegrained.planning import CapacityOutcome, ClusterProfile, ExecutorRequest
from airflow_provider_finegrained.planning.capacity import minimum_slots
from airflow_provider_finegrained.storage.filesystem import list_files, remove
from tests.capacity.test_sources import rm_with_am_limits
from tests.conftest import S3_BUCKET, s3_options
from tests.execution.test_executor_lifecycle import sizing

GiB = 2**30


@pytest.mark.parametrize(
    ("stage_minimums", "min_slots", "planned", "expected"),
    [
        ({"a": 1, "b": 1}, None, 8, 1),
        ({"a": 4, "b": 2}, None, 8, 4),
        ({"a": 4}, 6, 8, 6),
        ({"a": 16}, None, 8, 8),  # never more than the region planned: min parallelism runs in waves
        ({"a": 1}, 0, 1, 1),
    ],
)
def test_a_region_needs_its_largest_minimum(
    stage_minimums: dict[str, int], min_slots: int | None, planned: int, expected: int
) -> None:
    assert minimum_slots(stage_minimums, min_slots, planned) == expected


def test_reduced_profile_holds_exactly_the_granted_executors() -> None:
    profile = ClusterProfile(total_cores=8, total_memory=32 * GiB, executor_cores=2, executor_memory=4 * GiB)
    smaller = reduced_profile(profile, sizing(4), 2)
    # Two executors of 4 GiB heap plus 410 MiB overhead: the memory a standalone request leaves out counts here.
    assert (smaller.total_cores, smaller.total_memory) == (4, 2 * (4 * GiB + 410 * 2**20))
    assert (smaller.executor_cores, smaller.executor_memory) == (2, 4 * GiB)


def test_a_region_sized_again_on_the_reduced_profile_gets_the_granted_executors() -> None:
    from airflow_provider_finegrained.planning import StageDemand, size_region

    profile = ClusterProfile(total_cores=4, total_memory=8 * GiB, executor_cores=1, executor_memory=GiB)
    planned = size_region([StageDemand("s", 4)], profile)
    assert planned.executor_instances == 4
    again = size_region([StageDemand("s", 4)], reduced_profile(profile, planned, 2))
    assert (again.executor_instances, again.stages["s"].parallelism, again.stages["s"].waves) == (2, 4, 2)


def test_capacity_source_round_trips_through_a_trigger_payload() -> None:
    source = CapacitySource("standalone", ("http://127.0.0.1:8080/json/",), ledger_folder="/tmp/x")
    assert CapacitySource.from_dict(source.to_dict()) == source


@pytest.mark.parametrize(
    ("host", "extra", "kind", "urls", "queue"),
    [
        ("local[2]", {}, "declared", (), None),
        ("spark://127.0.0.1:7077", {"total_cores": 4}, "standalone", ("http://127.0.0.1:8080/json/",), None),
        ("yarn", {"total_cores": 4}, "declared", (), None),
        (
            "yarn",
            {"total_cores": 4, "yarn_resourcemanager_url": "http://rm:8088", "spark_conf": {"spark.yarn.queue": "etl"}},
            "yarn",
            ("http://rm:8088",),
            "etl",
        ),
        ("k8s://api-server:6443", {"total_cores": 4}, "declared", (), None),
    ],
)
def test_capacity_source_follows_the_launcher(
    host: str, extra: dict[str, object], kind: str, urls: tuple[str, ...], queue: str | None
) -> None:
    from airflow_provider_finegrained.execution.capacity_gate import capacity_source
    from airflow_provider_finegrained.settings import ConnectionSettings

    settings = ConnectionSettings.from_connection_fields(host, extra, airflow_home="/srv/airflow")
    source = capacity_source(settings)
    assert (source.kind, source.urls, source.queue) == (kind, urls, queue)
    assert CapacitySource.from_dict(source.to_dict()) == source


def test_cluster_queue_asks_for_the_whole_request_and_reserves_nothing(tmp_path: Path) -> None:
    # 4 cores declared, 2 of them already granted to another region: 1 of the 3 2-core executors fits now.
    source = CapacitySource("declared", cores=4, memory=16 * GiB, label="declared", ledger_folder=str(tmp_path))
    other = ExecutorRequest(executors=1, cores=2, memory=GiB, parallelism=2, slots_per_executor=2)
    acquire(source, other, "other", "other-app")
    request = ExecutorRequest(executors=3, cores=2, memory=GiB, parallelism=6, min_parallelism=6, slots_per_executor=2)
    with pytest.raises(CapacityWait, match="not enough free resources"):  # fit_now: below its minimum, it waits
        acquire(source, request, "mine", "my-app")
    grant = acquire(source, request, "mine", "my-app", cluster_queue=True)
    assert (grant.decision.outcome, grant.decision.executors) == (CapacityOutcome.QUEUED, 3)
    assert "3 executor(s) of 2 core(s), 1.0 GiB, 1 of them free now" in grant.decision.message
    assert grant.reservation is None
    with ReservationLedger(str(tmp_path)).locked() as view:
        assert [r.key for r in view.reservations()] == ["other"]
    too_big = ExecutorRequest(executors=1, cores=8, memory=GiB, parallelism=8)
    with pytest.raises(CapacityImpossible, match="no worker can ever hold one executor of 8 core"):
        acquire(source, too_big, "big", "big-app", cluster_queue=True)


def test_fit_now_waits_while_the_queue_holds_no_room_for_the_application_master(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Queue default has 4 cores and 7.8 GiB to spare, enough for the region's 2 executors and its master; but
    # alice's masters hold 2 of the 2.5 GiB one user's may (yarn_scheduler_am_limits.json): YARN would keep
    # hers ACCEPTED, so fit_now waits. bob's fits; cluster_queue asks YARN as before.
    with rm_with_am_limits() as url:
        source = CapacitySource("yarn", (url,), queue="default", ledger_folder=str(tmp_path))
        request = ExecutorRequest(
            executors=2, cores=1, memory=1408 * 2**20, parallelism=2, master_cores=1, master_memory=896 * 2**20
        )
        monkeypatch.setenv("HADOOP_USER_NAME", "alice")
        with pytest.raises(CapacityWait) as waited:
            acquire(source, request, "alice-region", "alice-app")
        assert (
            "no room for the region's ApplicationMaster: queue default: user alice's ApplicationMasters may hold "
            "2.5 GiB, 2.0 GiB held, this region's needs 1.0 GiB"  # 896 MiB in the RM's 512 MiB steps
        ) in waited.value.message
        assert "within queue default (4 core(s)" in waited.value.message  # the capacity read, as for other waits
        with ReservationLedger(str(tmp_path)).locked() as view:
            assert view.reservations() == []
        queued = acquire(source, request, "alice-region", "alice-app", cluster_queue=True)
        assert (queued.decision.outcome, queued.decision.executors) == (CapacityOutcome.QUEUED, 2)
        monkeypatch.setenv("HADOOP_USER_NAME", "bob")
        granted = acquire(source, request, "bob-region", "bob-app")
        assert (granted.decision.outcome, granted.decision.executors) == (CapacityOutcome.AS_REQUESTED, 2)


def test_a_region_granted_moments_ago_holds_its_application_master_in_the_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Queue default's masters hold 3 of 4.5 GiB; carol holds none. Her first region's master (1 GiB) fits and is
    # reserved; before YARN counts it, her second region's would make 5 GiB: it waits, not ACCEPTED behind it.
    with rm_with_am_limits() as url:
        monkeypatch.setenv("HADOOP_USER_NAME", "carol")
        source = CapacitySource("yarn", (url,), queue="default", ledger_folder=str(tmp_path))
        request = ExecutorRequest(
            executors=1, cores=1, memory=1408 * 2**20, parallelism=1, master_cores=1, master_memory=896 * 2**20
        )
        first = acquire(source, request, "dag/run/a/try=1", "dag.run.a")
        assert first.decision.outcome is CapacityOutcome.AS_REQUESTED
        assert first.reservation is not None
        assert (first.reservation.master_memory, first.reservation.queue) == (GiB, "default")
        with pytest.raises(CapacityWait, match=r"ApplicationMasters may hold 4\.5 GiB, 4\.0 GiB held, this region.s"):
            acquire(source, request, "dag/run/b/try=1", "dag.run.b")
        first.release()
        assert acquire(source, request, "dag/run/b/try=1", "dag.run.b").decision.outcome is CapacityOutcome.AS_REQUESTED


# --- the ledger on shared storage -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("root", "extra", "ledger"),
    [
        (
            "s3://lake/fg",
            {"storage_conn_id": "lake"},
            "s3://lake/fg/_capacity/spark___127.0.0.1_7077",
        ),
        (
            "hdfs://namenode:8020/fg",
            {"hadoop_conf_dir": "/etc/hadoop/conf"},
            "hdfs://namenode:8020/fg/_capacity/spark___127.0.0.1_7077",
        ),
    ],
)
@pytest.mark.security
def test_capacity_source_keeps_a_ledger_on_shared_storage_without_its_secrets(
    root: str, extra: dict[str, object], ledger: str
) -> None:
    from airflow_provider_finegrained.execution.capacity_gate import capacity_source
    from airflow_provider_finegrained.settings import ConnectionSettings

    settings = ConnectionSettings.from_connection_fields(
        "spark://127.0.0.1:7077", {"total_cores": 4, "storage_root": root, **extra}, airflow_home="/srv/airflow"
    )
    secret = "ledger-secret-0b7f"
    options = {"key": "AKID", "secret": secret, "client_kwargs": {"endpoint_url": "http://127.0.0.1:1"}}
    source = capacity_source(settings, conn_id="fg_lake", storage_options=options)
    assert source.ledger_folder == ledger
    ledger_of_source = source.ledger()
    assert ledger_of_source is not None and ledger_of_source.storage_options == options
    payload = json.dumps(source.to_dict())
    assert secret not in payload and "AKID" not in payload and secret not in repr(source)
    carried = CapacitySource.from_dict(json.loads(payload))
    assert carried == source and carried.conn_id == "fg_lake"
    assert carried.needs_storage_options and not source.needs_storage_options  # resolved again where it is opened


def test_two_acquires_on_an_s3_root_do_not_take_the_same_cores(moto_endpoint: str) -> None:
    """Two regions (two sources, as two hosts would build them from the trigger payload) on a 4-core declared
    capacity: the first takes 2 executors of 2 cores; the second sees its reservation on S3 and waits."""
    location = f"s3://{S3_BUCKET}/gate-tests/{uuid.uuid4().hex[:12]}/_capacity/local"
    payload = CapacitySource("declared", cores=4, memory=16 * GiB, label="declared", ledger_folder=location).to_dict()
    first, second = (CapacitySource.from_dict(payload).with_storage_options(s3_options(moto_endpoint)) for _ in "ab")
    request = ExecutorRequest(executors=2, cores=2, memory=GiB, parallelism=4, min_parallelism=4, slots_per_executor=2)
    try:
        grant = acquire(first, request, "dag/run/a/try=1", "app-a")
        assert (grant.decision.outcome, grant.decision.executors) == (CapacityOutcome.AS_REQUESTED, 2)
        assert len(list_files(location, s3_options(moto_endpoint))) == 1  # the reservation is on S3
        with pytest.raises(CapacityWait, match="minus 2 executor"):
            acquire(second, request, "dag/run/b/try=1", "app-b")
        grant.release()
        assert acquire(second, request, "dag/run/b/try=1", "app-b").decision.executors == 2
    finally:
        remove(location, s3_options(moto_endpoint))


# (min_slots, the region's data in 64 MiB tasks, free cores, expected: executors the gate admits, and the
# min / initial / max executors asked of Spark), on 2-core executors of 4 GiB, by hand:
# - 2 tasks plan 1 executor (2 slots); the gate's minimum is min(2, 8) = 2 slots: 1 executor admitted. The
#   minimum's 8 slots are 4 executors, which used to become minExecutors = maxExecutors = 4 (3 never admitted).
# - 8 tasks plan 4 executors; min_slots 8 is all of them: 4 admitted, 4 kept.
# - 8 tasks, 4 free cores: 2 executors fit, and the minimum min(8, 4) = 4 slots holds: reduced to 2 executors,
#   sized again on them; min_slots=4 keeps 2.
MINIMUM_CASES = [
    pytest.param(8, 2, 32, 1, (1, 1, 1), id="minimum-above-the-plan"),
    pytest.param(8, 8, 32, 4, (4, 4, 4), id="minimum-equals-the-plan"),
    pytest.param(4, 8, 4, 2, (2, 2, 2), id="reduced-grant-holds-the-minimum"),
]


@pytest.mark.parametrize(("min_slots", "tasks", "free_cores", "admitted", "asked"), MINIMUM_CASES)
def test_minimum_resources_never_oversubscribe_what_the_gate_admitted(
    min_slots: int, tasks: int, free_cores: int, admitted: int, asked: tuple[int, int, int]
) -> None:
    from airflow_provider_finegrained.execution.capacity_gate import region_request
    from airflow_provider_finegrained.execution.executor_lifecycle import executor_lifecycle_conf
    from airflow_provider_finegrained.planning import ResourceBounds, StageDemand, size_region

    profile = ClusterProfile(total_cores=32, total_memory=128 * GiB, executor_cores=2, executor_memory=4 * GiB)
    demand = [StageDemand("s", tasks, consumed_bytes=tasks * 2**20)]
    planned = size_region(demand, profile)
    least = minimum_slots({"s": 1}, min_slots, planned.slots)
    source = CapacitySource("declared", cores=free_cores, memory=128 * GiB, label="declared")
    grant = acquire(source, region_request(planned, least), key="k", app_name="app")
    assert grant.decision.executors == admitted
    ran = (
        planned
        if admitted == planned.executor_instances
        else size_region(demand, reduced_profile(profile, planned, admitted))
    )
    conf = executor_lifecycle_conf(ResourceBounds(min_slots=min_slots), ran)
    da = "spark.dynamicAllocation."
    got = tuple(int(conf[f"{da}{k}"]) for k in ("minExecutors", "initialExecutors", "maxExecutors"))
    assert got == asked
    assert max(got) <= grant.decision.executors
    assert int(conf["spark.cores.max"]) <= grant.decision.executors * ran.executor_cores


# (connection extra, expected outcome), on Kubernetes (declared capacity): a region of 2 executors of 2 cores,
# each with 1 whole GPU (gpus=0.5 per task, 2 slots share one). Declared 0 GPUs (the default): no executor can
# ever hold its GPU, impossible; 2 GPUs: as requested; 1 GPU: only one executor fits, run smaller.
DECLARED_GPU_CASES = [
    pytest.param({}, "impossible", id="no-gpus-declared"),
    pytest.param({"total_gpus": 2}, "as_requested", id="two-declared"),
    pytest.param({"total_gpus": 1}, "reduced", id="one-declared"),
]


@pytest.mark.parametrize(("extra", "expected"), DECLARED_GPU_CASES)
def test_a_gpu_resource_spec_can_run_on_declared_capacity(extra: dict[str, object], expected: str) -> None:
    from airflow_provider_finegrained.execution.capacity_gate import capacity_source, region_request
    from airflow_provider_finegrained.planning import ResourceSpec, StageDemand, size_region
    from airflow_provider_finegrained.settings import ConnectionSettings

    settings = ConnectionSettings.from_connection_fields(
        "k8s://api-server:6443", {"total_cores": 8, "total_memory": "32g", **extra}, airflow_home="/srv/airflow"
    )
    source = replace(capacity_source(settings), ledger_folder=None)
    assert CapacitySource.from_dict(source.to_dict()) == source  # the trigger's payload keeps the GPUs
    demand = StageDemand("infer", parallelism=4, resources=ResourceSpec(cpu_cores=1, heap_memory="1g", gpus=0.5))
    planned = size_region([demand], settings.cluster_profile())
    assert (planned.executor_instances, planned.executor_gpus) == (2, 1)
    request = region_request(planned, 1)
    if expected == "impossible":
        with pytest.raises(CapacityImpossible, match=r"no worker can ever hold one executor of .*1 GPU\(s\).* 0 GPUs"):
            acquire(source, request, key="k", app_name="app")
        return
    assert acquire(source, request, key="k", app_name="app").decision.outcome.value == expected


@pytest.mark.parametrize(
    ("held", "expected"),
    [
        (["dag/run/region-1/try=1"], ["dag/run/region-1/try=1"]),  # the region's earlier try
        (["dag/run/region-1/try=1", "dag/run/region-1/try=2"], ["dag/run/region-1/try=1", "dag/run/region-1/try=2"]),
        (["dag/run/region-1/try=3"], []),  # a later try is not superseded by an earlier one
        (["dag/run/region-2/try=1", "dag/other/region-1/try=1", "other/run/region-1/try=1"], []),
        (["dag/run/region-1/try=x", "unkeyed"], []),
    ],
)
def test_earlier_tries_of_the_same_region(held: list[str], expected: list[str]) -> None:
    from airflow_provider_finegrained.capacity import Reservation
    from airflow_provider_finegrained.execution.capacity_gate import earlier_tries

    reservations = [Reservation(key=k, app_name=k, executors=1, executor_cores=1, executor_memory=GiB) for k in held]
    assert [r.key for r in earlier_tries("dag/run/region-1/try=3", reservations)] == expected


def test_a_retry_is_not_held_back_by_the_reservation_of_its_own_lost_try(tmp_path: Path) -> None:
    """Try 1's host was cut off holding the whole cluster in the ledger; Airflow failed it and runs try 2, which
    must get the capacity now, not after try 1's reservation goes stale (seen on the multi-host rehearsal)."""
    source = CapacitySource("declared", cores=2, memory=8 * GiB, label="declared", ledger_folder=str(tmp_path))
    request = ExecutorRequest(executors=2, cores=1, memory=GiB, parallelism=2, min_parallelism=2, slots_per_executor=1)
    acquire(source, request, "dag/run/region-1/try=1", "dag.region-1 [run try 1]")
    with pytest.raises(CapacityWait):  # another region still waits for it
        acquire(source, request, "dag/run/region-2/try=1", "dag.region-2 [run try 1]")
    grant = acquire(source, request, "dag/run/region-1/try=2", "dag.region-1 [run try 2]")
    assert (grant.decision.outcome, grant.decision.executors) == (CapacityOutcome.AS_REQUESTED, 2)
    with ReservationLedger(str(tmp_path)).locked() as view:
        assert [r.key for r in view.reservations()] == ["dag/run/region-1/try=2"]
