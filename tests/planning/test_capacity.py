"""Declarative capacity decisions (FLIP-138) and the min/max stability check, worked by hand."""

from __future__ import annotations

from dataclasses import replace

import pytest

from airflow_provider_finegrained.planning import (
    CapacityOutcome,
    ExecutorRequest,
    ResourceBounds,
    WorkerCapacity,
    WorkerShape,
    check_resource_stability,
    decide_capacity,
    queue_capacity,
)
from airflow_provider_finegrained.planning.capacity import MasterLimit

GiB = 2**30
# 4 executors x 2 slots = 8 slots for 16 tasks: two waves. Minimum parallelism 4.
REQUEST = ExecutorRequest(executors=4, cores=2, memory=2 * GiB, parallelism=16, min_parallelism=4, slots_per_executor=2)


@pytest.mark.parametrize(
    ("workers", "outcome", "executors", "parallelism"),
    [
        pytest.param([WorkerCapacity(8, 16 * GiB)], "as_requested", 4, 16, id="enough"),
        pytest.param([WorkerCapacity(16, 64 * GiB)], "as_requested", 4, 16, id="more-than-enough"),
        # 2 executors fit = 4 slots >= min 4; keep 2 waves: min(16, 4 * 2) = 8.
        pytest.param([WorkerCapacity(4, 16 * GiB)], "reduced", 2, 8, id="half-the-cores"),
        pytest.param([WorkerCapacity(8, 5 * GiB)], "reduced", 2, 8, id="memory-limits-to-two"),
        pytest.param([WorkerCapacity(3, 8 * GiB), WorkerCapacity(3, 8 * GiB)], "reduced", 2, 8, id="per-worker-fit"),
        # 1 executor = 2 slots < min parallelism 4.
        pytest.param([WorkerCapacity(2, 16 * GiB)], "wait", 0, 0, id="below-minimum-waits"),
        pytest.param([WorkerCapacity(1, 1 * GiB)], "wait", 0, 0, id="nothing-fits"),
        pytest.param([], "wait", 0, 0, id="no-workers"),
    ],
)
def test_decide_capacity(workers: list[WorkerCapacity], outcome: str, executors: int, parallelism: int) -> None:
    decision = decide_capacity(REQUEST, workers)
    assert (decision.outcome, decision.executors, decision.parallelism) == (outcome, executors, parallelism)
    assert decision.can_run == (outcome in ("as_requested", "reduced"))


# YARN's ApplicationMaster takes 1 core and 1 GiB on one NodeManager besides the executors (1 core, 1.5 GiB
# each, as YARN rounds 1 GiB + 384 MiB up to 256 MiB steps), e.g. the loopback cluster's two nodes of 2 cores.
WITH_MASTER = ExecutorRequest(
    executors=4, cores=1, memory=1536 * 2**20, parallelism=4, min_parallelism=1, master_cores=1, master_memory=GiB
)


@pytest.mark.parametrize(
    ("workers", "outcome", "executors"),
    [
        # 2 + 2 cores: the master takes a core of one node, so 1 + 2 executors fit, not the 4 cores' worth.
        pytest.param([WorkerCapacity(2, 4 * GiB)] * 2, "reduced", 3, id="master-takes-a-core"),
        # 3 + 2 cores: on the 3-core node the master leaves 2 executors, on the 2-core node 1; the best is 2 + 2.
        pytest.param([WorkerCapacity(3, 8 * GiB), WorkerCapacity(2, 8 * GiB)], "as_requested", 4, id="best-node"),
        # Memory: 4 GiB holds 2 executors (3 GiB) and the master (1 GiB), exactly.
        pytest.param([WorkerCapacity(8, 4 * GiB)] * 2, "as_requested", 4, id="memory-exactly"),
        # 3.5 GiB: a node with the master holds one executor (2.5 GiB left), the other two.
        pytest.param([WorkerCapacity(8, 3584 * 2**20)] * 2, "reduced", 3, id="memory-with-master"),
        # No node has a core left for the master: no executor can start.
        pytest.param([WorkerCapacity(0, 8 * GiB), WorkerCapacity(0, 8 * GiB)], "wait", 0, id="no-room-for-master"),
        # The aggregate pseudo-worker (ResourceManager metrics): the master comes off the total.
        pytest.param([WorkerCapacity(4, 16 * GiB)], "reduced", 3, id="aggregate"),
    ],
)
def test_an_application_master_takes_its_container_before_the_executors(
    workers: list[WorkerCapacity], outcome: str, executors: int
) -> None:
    decision = decide_capacity(WITH_MASTER, workers)
    assert (decision.outcome, decision.executors) == (outcome, executors)
    assert "plus a master container (ApplicationMaster or cluster-mode driver) of 1 core(s), 1.0 GiB" in (
        decision.message
    )
    assert queue_capacity(WITH_MASTER, workers).executors == 4  # queued: asks for all, YARN places the master


MiB = 2**20
SMALL_QUEUE_FULL = MasterLimit("small", 2 * GiB, 1536 * MiB)


@pytest.mark.parametrize(
    ("limit", "request_", "outcome", "message"),
    [
        # Cores and memory for all 4 executors, but 1.5 GiB of the queue's 2 GiB held by masters: 1 more does not fit.
        pytest.param(
            SMALL_QUEUE_FULL,
            WITH_MASTER,
            "wait",
            "no room for the region's ApplicationMaster: queue small: ApplicationMasters may hold 2.0 GiB, 1.5 GiB "
            "held, this region's needs 1.0 GiB",
            id="queue-full",
        ),
        pytest.param(
            SMALL_QUEUE_FULL, replace(WITH_MASTER, master_memory=512 * MiB), "as_requested", "", id="small-master-fits"
        ),
        pytest.param(
            MasterLimit("default", 8 * GiB, 2 * GiB, "alice", 3 * GiB, 2560 * MiB),
            WITH_MASTER,
            "wait",
            "queue default: user alice's ApplicationMasters may hold 3.0 GiB, 2.5 GiB held, "
            "this region's needs 1.0 GiB",
            id="user-full",
        ),
        # No user name to find in the queue's users: none of its masters counted, its share still bounds one.
        pytest.param(
            MasterLimit("default", 8 * GiB, 2 * GiB, None, 768 * MiB),
            WITH_MASTER,
            "wait",
            "queue default: one user's ApplicationMasters may hold 768.0 MiB, 0 B held, this region's needs 1.0 GiB",
            id="unnamed-user",
        ),
        # Nothing held: the scheduler starts one master however small its limit.
        pytest.param(MasterLimit("tiny", 512 * MiB, 0), WITH_MASTER, "as_requested", "", id="empty-queue-starts-one"),
        # No master container (standalone client mode): the limit is not the region's business.
        pytest.param(
            SMALL_QUEUE_FULL, replace(WITH_MASTER, master_cores=0, master_memory=0), "as_requested", "", id="no-master"
        ),
        # A region that could never run fails rather than wait for masters to end.
        pytest.param(
            SMALL_QUEUE_FULL,
            replace(WITH_MASTER, cores=16),
            "impossible",
            "no worker can ever hold one executor",
            id="impossible-first",
        ),
    ],
)
def test_a_region_whose_application_master_does_not_fit_the_queue_waits(
    limit: MasterLimit, request_: ExecutorRequest, outcome: str, message: str
) -> None:
    workers = [WorkerCapacity(8, 16 * GiB, total_cores=8, total_memory=16 * GiB)] * 2
    assert decide_capacity(request_, workers).outcome in ("as_requested", "impossible")  # without the limit
    decision = decide_capacity(request_, workers, limit)
    assert decision.outcome == outcome
    assert message in decision.message
    if outcome == "wait":
        assert (decision.executors, decision.parallelism, decision.can_run) == (0, 0, False)
    # Where YARN queues the application, it queues the master too: cluster_queue is unchanged.
    assert queue_capacity(request_, workers).outcome == ("impossible" if outcome == "impossible" else "queued")


@pytest.mark.parametrize(
    ("memory", "master_memory", "step", "expected"),
    [
        # 1 GiB + 384 MiB of overhead: YARN's default 1 GiB minimum allocation makes it a 2 GiB container.
        (1408 * 2**20, 896 * 2**20, GiB, (2 * GiB, GiB)),
        # The loopback cluster's 256 MiB steps: 1.5 GiB and 1 GiB.
        (1408 * 2**20, 896 * 2**20, 256 * 2**20, (1536 * 2**20, GiB)),
        # Already a multiple: unchanged; a step of 0 (the manager does not round): unchanged.
        (2 * GiB, 0, GiB, (2 * GiB, 0)),
        (1408 * 2**20, 896 * 2**20, 0, (1408 * 2**20, 896 * 2**20)),
    ],
)
def test_containers_round_up_to_the_allocation_step(
    memory: int, master_memory: int, step: int, expected: tuple[int, int]
) -> None:
    request = ExecutorRequest(
        executors=2, cores=1, memory=memory, parallelism=2, master_cores=1, master_memory=master_memory
    )
    rounded = request.in_containers_of(step)
    assert (rounded.memory, rounded.master_memory) == expected
    assert (rounded.executors, rounded.cores, rounded.master_cores) == (2, 1, 1)


def test_wait_message_gives_what_was_asked_and_what_is_free() -> None:
    message = decide_capacity(REQUEST, [WorkerCapacity(2, 3 * GiB)]).message
    assert "4 executor(s) of 2 core(s), 2.0 GiB" in message
    assert "min parallelism 4" in message
    assert "free: 2 core(s), 3.0 GiB" in message


def test_reduced_parallelism_never_below_minimum() -> None:
    request = ExecutorRequest(executors=4, cores=1, memory=GiB, parallelism=4, min_parallelism=3)
    decision = decide_capacity(request, [WorkerCapacity(3, 8 * GiB)])
    assert (decision.outcome, decision.executors, decision.parallelism) == (CapacityOutcome.REDUCED, 3, 3)


def test_executor_larger_than_any_worker_is_impossible_not_a_wait() -> None:
    workers = [WorkerCapacity(0, 0, total_cores=4, total_memory=1 * GiB)] * 2
    decision = decide_capacity(REQUEST, workers)
    assert decision.outcome is CapacityOutcome.IMPOSSIBLE
    assert "no worker can ever hold one executor of 2 core(s), 2.0 GiB" in decision.message
    assert "4 cores, 1.0 GiB" in decision.message


def test_busy_worker_that_could_hold_it_later_means_wait() -> None:
    workers = [WorkerCapacity(0, 0, total_cores=8, total_memory=16 * GiB)]
    assert decide_capacity(REQUEST, workers).outcome is CapacityOutcome.WAIT


def test_gpus_limit_the_fit() -> None:
    request = ExecutorRequest(executors=4, cores=1, memory=GiB, parallelism=4, min_parallelism=1, gpus=1)
    decision = decide_capacity(request, [WorkerCapacity(8, 8 * GiB, free_gpus=2)])
    assert (decision.outcome, decision.executors) == (CapacityOutcome.REDUCED, 2)


@pytest.mark.parametrize(
    ("workers", "outcome", "executors", "free_now"),
    [
        # The whole request, whatever is free now; the message says how much of it is.
        pytest.param([WorkerCapacity(8, 16 * GiB)], "queued", 4, 4, id="all-free"),
        pytest.param([WorkerCapacity(16, 64 * GiB)], "queued", 4, 4, id="more-than-enough"),
        pytest.param([WorkerCapacity(4, 16 * GiB)], "queued", 4, 2, id="half-free"),
        pytest.param([WorkerCapacity(3, 8 * GiB), WorkerCapacity(3, 8 * GiB)], "queued", 4, 2, id="per-worker-fit"),
        # Below the minimum parallelism (decide_capacity waits): the cluster manager's queue holds it instead.
        pytest.param([WorkerCapacity(2, 16 * GiB)], "queued", 4, 1, id="below-minimum-queues"),
        pytest.param([WorkerCapacity(0, 0, total_cores=8, total_memory=16 * GiB)], "queued", 4, 0, id="all-busy"),
        pytest.param([], "queued", 4, 0, id="no-workers-reported"),
        # Never: no worker could hold one executor even idle.
        pytest.param([WorkerCapacity(0, 0, total_cores=4, total_memory=GiB)], "impossible", 0, 0, id="never-fits"),
    ],
)
def test_queue_capacity_asks_for_everything_and_refuses_only_what_never_fits(
    workers: list[WorkerCapacity], outcome: str, executors: int, free_now: int
) -> None:
    decision = queue_capacity(REQUEST, workers)
    assert (decision.outcome, decision.executors) == (outcome, executors)
    assert decision.can_run == (outcome == "queued")
    if outcome == "queued":
        assert decision.parallelism == REQUEST.parallelism
        assert f"for 4 executor(s) of 2 core(s), 2.0 GiB, {free_now} of them free now" in decision.message
    else:
        assert "no worker can ever hold one executor of 2 core(s), 2.0 GiB" in decision.message


WORKER = WorkerShape(slots=5, cpu=5, memory=10 * GiB)


@pytest.mark.parametrize(
    ("bounds", "expected"),
    [
        pytest.param(ResourceBounds(min_slots=10, max_slots=14), (2, 2), id="10-slots-is-two-workers"),
        pytest.param(ResourceBounds(max_slots=14), (0, 2), id="no-minimum-no-check"),
        pytest.param(ResourceBounds(), (0, None), id="no-bounds"),
        pytest.param(ResourceBounds(min_cpu=6, max_slots=10), (2, 2), id="cpu-minimum"),
        pytest.param(ResourceBounds(min_memory=25 * GiB, max_memory=30 * GiB), (3, 3), id="memory"),
    ],
)
def test_stable_bounds(bounds: ResourceBounds, expected: tuple[int, int | None]) -> None:
    assert check_resource_stability(bounds, WORKER) == expected


@pytest.mark.parametrize(
    ("bounds", "message"),
    [
        # The document's example: 5 slots per worker, min 11 -> 3 workers = 15 slots > max 14.
        pytest.param(
            ResourceBounds(min_slots=11, max_slots=14),
            r"min slots 11 needs 3 worker\(s\).*15 slots, above max slots 14",
            id="flink-example",
        ),
        pytest.param(
            ResourceBounds(min_memory=12 * GiB, max_memory=16 * GiB),
            r"min memory 12.0 GiB needs 2 worker\(s\).*20.0 GiB memory, above max memory 16.0 GiB",
            id="memory",
        ),
        pytest.param(ResourceBounds(min_cpu=6, max_slots=5), r"min cpu 6 needs 2 worker", id="cpu-against-slots"),
        pytest.param(
            ResourceBounds(min_slots=8, max_slots=4), "min slots \\(8\\) is above max slots \\(4\\)", id="min-above-max"
        ),
        pytest.param(ResourceBounds(min_slots=-1), "must be >= 0", id="negative"),
    ],
)
def test_unstable_bounds_are_rejected_with_numbers(bounds: ResourceBounds, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_resource_stability(bounds, WORKER)
