"""Executor settings -> ExecutorRequest, worked by hand, and what decide_capacity makes of them."""

from __future__ import annotations

import pytest

from airflow_provider_finegrained.capacity import application_master, declared_capacity, executor_request, local_request
from airflow_provider_finegrained.planning import CapacityOutcome, ExecutorRequest, WorkerCapacity, decide_capacity

MiB, GiB = 2**20, 2**30


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # 4 x (2 cores, 2 GiB + 384 MiB overhead): 1 task per core.
        pytest.param(
            (4, 2, 1, 2 * GiB, 384 * MiB, 0, 0, 16, 4),
            ExecutorRequest(4, 2, 2 * GiB + 384 * MiB, 16, 4, slots_per_executor=2),
            id="plain",
        ),
        # task.cpus 2 on 5 cores: 5 // 2 = 2 slots, the fifth core idles.
        pytest.param(
            (3, 5, 2, 4 * GiB, 512 * MiB, 0, 0, 12, 6),
            ExecutorRequest(3, 5, 4 * GiB + 512 * MiB, 12, 6, slots_per_executor=2),
            id="task-cpus-round-down",
        ),
        # Off-heap is outside the heap and the overhead: a worker must hold all three.
        pytest.param(
            (2, 4, 1, 8 * GiB, GiB, 2 * GiB, 1, 8, 8),
            ExecutorRequest(2, 4, 11 * GiB, 8, 8, slots_per_executor=4, gpus=1),
            id="off-heap-and-gpu",
        ),
        # Min parallelism 6 is above the 2 x 2 = 4 slots: allowed, decide_capacity then needs every executor.
        pytest.param(
            (2, 4, 2, GiB, 0, 0, 0, 8, 6),
            ExecutorRequest(2, 4, GiB, 8, 6, slots_per_executor=2),
            id="min-above-slots",
        ),
    ],
)
def test_executor_request(
    args: tuple[int, int, int, int, int, int, float, int, int], expected: ExecutorRequest
) -> None:
    request = executor_request(*args)
    assert request == expected


@pytest.mark.parametrize(
    ("free_cores", "outcome", "executors", "parallelism"),
    [
        pytest.param(8, CapacityOutcome.AS_REQUESTED, 2, 8, id="both-fit"),
        # One executor = 2 slots < min(6, 4 slots) = 4: cannot run smaller, waits.
        pytest.param(4, CapacityOutcome.WAIT, 0, 0, id="one-fits-min-above-waits"),
    ],
)
def test_min_above_what_fits(free_cores: int, outcome: CapacityOutcome, executors: int, parallelism: int) -> None:
    request = executor_request(2, 4, 2, GiB, 0, 0, 0, parallelism=8, min_parallelism=6)
    decision = decide_capacity(request, [WorkerCapacity(free_cores, 16 * GiB)])
    assert (decision.outcome, decision.executors, decision.parallelism) == (outcome, executors, parallelism)


def test_memory_with_overhead_can_make_a_fitting_heap_impossible() -> None:
    """A 3 GiB heap fits a 4 GiB worker; with 1.5 GiB overhead it never does."""
    worker = WorkerCapacity(8, 4 * GiB, total_cores=8, total_memory=4 * GiB)
    assert decide_capacity(executor_request(1, 1, 1, 3 * GiB, 0, 0, 0, 1, 1), [worker]).can_run
    heavy = executor_request(1, 1, 1, 3 * GiB, 1536 * MiB, 0, 0, 1, 1)
    assert decide_capacity(heavy, [worker]).outcome is CapacityOutcome.IMPOSSIBLE


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        # local[4], 2 GiB driver + 384 MiB overhead: one block of 4 cores.
        pytest.param(
            {"threads": 4, "task_cpus": 1, "driver_memory": 2 * GiB, "driver_memory_overhead": 384 * MiB,
             "off_heap_memory": 0, "parallelism": 8, "min_parallelism": 2},
            ExecutorRequest(1, 4, 2 * GiB + 384 * MiB, 8, 2, slots_per_executor=4),
            id="local-4",
        ),
        pytest.param(
            {"threads": 2, "task_cpus": 2, "driver_memory": GiB, "driver_memory_overhead": 0,
             "off_heap_memory": 512 * MiB, "parallelism": 3, "min_parallelism": 1},
            ExecutorRequest(1, 2, GiB + 512 * MiB, 3, 1, slots_per_executor=1),
            id="task-cpus-2-off-heap",
        ),
    ],
)  # fmt: skip
def test_local_request(kwargs: dict[str, int], expected: ExecutorRequest) -> None:
    assert local_request(**kwargs) == expected


@pytest.mark.parametrize(
    ("threads", "outcome"),
    [
        pytest.param(2, CapacityOutcome.AS_REQUESTED, id="local-2-on-2-cores"),
        # A local JVM cannot be split: 4 threads on 2 declared cores never fit.
        pytest.param(4, CapacityOutcome.IMPOSSIBLE, id="local-4-on-2-cores"),
    ],
)
def test_local_request_against_declared_machine(threads: int, outcome: CapacityOutcome) -> None:
    machine = declared_capacity(2, 24 * GiB, "this machine (declared)")
    request = local_request(threads, 1, 2 * GiB, 384 * MiB, 0, parallelism=8, min_parallelism=1)
    assert decide_capacity(request, machine.workers).outcome is outcome


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param((0, 2, 1, GiB, 0, 0, 0, 4, 1), "executors must be >= 1", id="no-executors"),
        pytest.param((1, 1, 2, GiB, 0, 0, 0, 4, 1), r"cores \(1\) must be >= task cpus \(2\)", id="task-cpus-above"),
        pytest.param((1, 2, 0, GiB, 0, 0, 0, 4, 1), "task cpus must be >= 1", id="task-cpus-zero"),
        pytest.param((1, 2, 1, 0, 0, 0, 0, 4, 1), "memory must be >= 1 byte", id="no-memory"),
        pytest.param((1, 2, 1, GiB, -1, 0, 0, 4, 1), "must be >= 0", id="negative-overhead"),
        pytest.param((1, 2, 1, GiB, 0, 0, 0, 4, 5), "min_parallelism <= parallelism, got 5 and 4", id="min-above-p"),
        pytest.param((1, 2, 1, GiB, 0, 0, 0, 4, 0), "need 1 <= min_parallelism", id="min-zero"),
    ],
)
def test_executor_request_rejects(args: tuple[int, int, int, int, int, int, float, int, int], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        executor_request(*args)


@pytest.mark.parametrize(
    ("cluster_mode", "conf", "step_mib", "expected"),
    [
        # Client mode: Spark's executor launcher, 512 MiB + the 384 MiB minimum overhead; YARN's steps round it up.
        pytest.param(False, {}, 0, (1, 896), id="client-defaults"),
        pytest.param(False, {}, 256, (1, 1024), id="client-defaults-256-step"),
        pytest.param(False, {}, 1024, (1, 1024), id="client-defaults-1g-step"),
        pytest.param(False, {"spark.yarn.am.memory": "2g"}, 512, (1, 2560), id="client-min-overhead"),  # 2048 + 384
        # 10% of 8 GiB is 819.2 MiB: Spark counts whole MiB.
        pytest.param(False, {"spark.yarn.am.memory": "8g"}, 0, (1, 8192 + 819), id="client-ten-percent"),
        pytest.param(False, {"spark.yarn.am.memory": "2048"}, 0, (1, 2048 + 384), id="client-bare-number-is-mib"),
        pytest.param(
            False,
            {"spark.yarn.am.memoryOverhead": "1g", "spark.yarn.am.cores": "2"},
            0,
            (2, 512 + 1024),
            id="client-overrides",
        ),
        # The driver's settings size the driver, which runs beside spark-submit, not in the ApplicationMaster.
        pytest.param(False, {"spark.driver.memory": "4g", "spark.driver.cores": "4"}, 0, (1, 896), id="client-driver"),
        # Cluster mode: the driver is the ApplicationMaster, 1 GiB + 384 MiB by default.
        pytest.param(True, {}, 0, (1, 1408), id="cluster-defaults"),
        pytest.param(True, {}, 512, (1, 1536), id="cluster-defaults-512-step"),
        pytest.param(True, {"spark.driver.memory": "4g"}, 1024, (1, 5120), id="cluster-ten-percent"),  # 4096 + 409
        pytest.param(
            True,
            {"spark.driver.memory": "4g", "spark.driver.memoryOverheadFactor": "0.25"},
            0,
            (1, 4096 + 1024),
            id="cluster-overhead-factor",
        ),
        pytest.param(
            True, {"spark.driver.minMemoryOverhead": "1g"}, 0, (1, 1024 + 1024), id="cluster-minimum-overhead"
        ),
        pytest.param(
            True,
            {"spark.driver.memoryOverhead": "600m", "spark.driver.cores": "3", "spark.yarn.am.memory": "8g"},
            0,
            (3, 1024 + 600),
            id="cluster-overrides",
        ),
    ],
)
def test_the_application_master_is_sized_as_spark_4_sizes_it(
    cluster_mode: bool, conf: dict[str, str], step_mib: int, expected: tuple[int, int]
) -> None:
    cores, memory = application_master(conf, cluster_mode)
    request = ExecutorRequest(1, 1, GiB, 1, master_cores=cores, master_memory=memory).in_containers_of(step_mib * MiB)
    assert (request.master_cores, request.master_memory) == (expected[0], expected[1] * MiB)


@pytest.mark.parametrize("cores", ["0", "two", "-1"])
def test_application_master_cores_must_be_a_whole_number(cores: str) -> None:
    with pytest.raises(ValueError, match=r"spark.yarn.am.cores: .*; allowed: a whole number of at least 1"):
        application_master({"spark.yarn.am.cores": cores}, cluster_mode=False)
