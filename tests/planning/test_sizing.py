"""Sizing: even waves (FLIP-370), memory floor, executor shape from ResourceSpecs, Spark conf.

Expected values are worked out by hand; MiB = 2**20.
"""

from __future__ import annotations

import re

import pytest

from airflow_provider_finegrained.planning import ClusterProfile, ResourceSpec, StageDemand, even_waves, size_region

MiB = 2**20
GiB = 2**30


@pytest.mark.parametrize(
    ("parallelism", "slots", "low", "high", "expected"),
    [
        pytest.param(3, 4, 1, 100, 3, id="one-wave-stays"),
        pytest.param(8, 4, 1, 100, 8, id="whole-waves-stay"),
        pytest.param(9, 8, 1, 100, 8, id="just-above-a-multiple-goes-down"),
        pytest.param(12, 8, 1, 100, 16, id="tie-goes-up"),
        pytest.param(13, 8, 1, 100, 16, id="nearer-multiple-up"),
        pytest.param(9, 8, 9, 100, 16, id="min-forbids-down"),
        pytest.param(13, 8, 1, 14, 8, id="max-forbids-up"),
        pytest.param(13, 8, 9, 14, 13, id="bounds-force-partial-wave"),
        pytest.param(5, 2, 1, 100, 6, id="two-slots-odd-tie-up"),
        pytest.param(200, 2, 1, 200, 200, id="spark-default-200-on-2-slots"),
        pytest.param(1, 1, 1, 1, 1, id="single"),
    ],
)
def test_even_waves(parallelism: int, slots: int, low: int, high: int, expected: int) -> None:
    assert even_waves(parallelism, slots, low, high) == expected


LOCAL = ClusterProfile(total_cores=2, total_memory=8 * GiB, executor_memory=4 * GiB, local=True)
CLUSTER = ClusterProfile(total_cores=16, total_memory=64 * GiB, executor_cores=4, executor_memory=4 * GiB)


def test_local_region_uses_driver_memory_and_even_waves() -> None:
    sizing = size_region([StageDemand("agg", parallelism=3)], LOCAL)
    stage = sizing.stages["agg"]
    # 3 tasks on 2 slots: 1 and 3 are equally near, the tie goes up to 4 (two full waves).
    assert (stage.parallelism, stage.requested_parallelism, stage.waves) == (4, 3, 2)
    assert sizing.application_conf() == {"spark.driver.memory": "4096m", "spark.memory.fraction": "0.60"}
    # (4096 - 300) MiB * 0.6 / 2 slots per executor
    assert stage.per_task_memory == int((4096 - 300) * MiB * 0.6 / 2)
    assert stage.session_conf() == {
        "spark.sql.shuffle.partitions": "4",
        "spark.sql.files.maxPartitionBytes": str(1 * MiB),  # zero bytes: the 1 MiB floor
    }


def test_memory_floor_raises_parallelism_so_a_task_fits_its_share() -> None:
    profile = ClusterProfile(total_cores=2, total_memory=8 * GiB, executor_memory=1324 * MiB, local=True)
    # per task: (1324 - 300) MiB * 0.6 / 2 = 307.2 MiB; with fraction 0.5: 153.6 MiB.
    # 1000 MiB on disk * expansion 3 = 3000 MiB -> ceil(3000 / 153.6) = ceil(19.53) = 20 tasks.
    demand = StageDemand("join", parallelism=4, consumed_bytes=1000 * MiB, memory_fraction=0.5)
    stage = size_region([demand], profile).stages["join"]
    assert stage.memory_floor == 20
    assert stage.parallelism == 20
    assert "memory floor" in stage.notes[0]


def test_memory_floor_capped_by_max_and_said_so() -> None:
    profile = ClusterProfile(total_cores=2, total_memory=8 * GiB, executor_memory=1324 * MiB, local=True)
    demand = StageDemand("join", parallelism=4, consumed_bytes=1000 * MiB, memory_fraction=0.5, max_parallelism=10)
    stage = size_region([demand], profile).stages["join"]
    assert stage.parallelism == 10
    assert any("above max_parallelism" in note for note in stage.notes)


def test_memory_floor_at_max_already_raises_nothing_and_says_only_that() -> None:
    profile = ClusterProfile(total_cores=2, total_memory=8 * GiB, executor_memory=1324 * MiB, local=True)
    # Floor 20 (as above) but the stage is already at its max 10: it stays at 10 (5 waves of 2), and
    # the notes do not claim a raise from 10 to 10.
    demand = StageDemand("join", parallelism=10, consumed_bytes=1000 * MiB, memory_fraction=0.5, max_parallelism=10)
    stage = size_region([demand], profile).stages["join"]
    assert stage.parallelism == 10
    assert stage.notes == ("memory floor 20 is above max_parallelism; tasks may spill to disk",)


def test_fixed_parallelism_is_left_alone() -> None:
    demand = StageDemand("fixed", parallelism=3, consumed_bytes=10 * GiB, fixed=True)
    assert size_region([demand], LOCAL).stages["fixed"].parallelism == 3


def test_cluster_region_executor_count_follows_the_widest_stage() -> None:
    sizing = size_region([StageDemand("scan", parallelism=10, consumed_bytes=640 * MiB)], CLUSTER)
    # ceil(10 / 4 cores) = 3 executors, 12 slots: one wave, 3 or 4 tasks per executor.
    assert sizing.executor_instances == 3
    stage = sizing.stages["scan"]
    assert (stage.parallelism, stage.waves, stage.tasks_per_executor) == (10, 1, (3, 4))
    assert stage.max_partition_bytes == 64 * MiB  # 640 MiB / 10 tasks
    assert sizing.application_conf() == {
        "spark.memory.fraction": "0.60",
        "spark.executor.instances": "3",
        "spark.executor.cores": "4",
        "spark.executor.memory": "4096m",
        "spark.executor.memoryOverhead": "409m",  # max(384 MiB, 10% of 4096 MiB = 409.6 MiB)
        "spark.cores.max": "12",
        "spark.task.cpus": "1",
    }


@pytest.mark.parametrize(
    ("parallelism", "max_parallelism", "expected"),
    [
        pytest.param(40, 1000, 48, id="40-on-16-slots-tie-up-to-48"),
        pytest.param(40, 40, 32, id="max-40-goes-down-to-32"),
        pytest.param(33, 1000, 32, id="33-down-to-32"),
    ],
)
def test_cluster_capacity_caps_executors_and_waves_even_out(
    parallelism: int, max_parallelism: int, expected: int
) -> None:
    # 16 cores / 4 per executor = 4 executors at most; 64 GiB / 4.4 GiB = 14 by memory.
    demand = StageDemand("agg", parallelism=parallelism, max_parallelism=max_parallelism)
    sizing = size_region([demand], CLUSTER)
    assert sizing.executor_instances == 4
    assert sizing.stages["agg"].parallelism == expected


def test_resource_specs_shape_the_executor_as_flip53_slots() -> None:
    a = ResourceSpec(cpu_cores=1, heap_memory="1g", managed_memory="1g")
    b = ResourceSpec(cpu_cores=0.5, heap_memory="512m", managed_memory="512m", gpus=1)
    sizing = size_region(
        [StageDemand("a", parallelism=4, resources=a), StageDemand("b", parallelism=4, resources=b)], CLUSTER
    )
    # Slot = a + b = 1.5 cpu -> 2 task cpus; heap 1.5g + managed 1.5g = 3 GiB on heap; 4 cores -> 2 slots.
    assert (sizing.task_cpus, sizing.executor_cores) == (2, 4)
    assert sizing.executor_memory == 2 * 3 * GiB + 300 * MiB
    assert sizing.memory_fraction == 0.5  # managed 1.5g / on-heap 3g
    conf = sizing.application_conf()
    assert conf["spark.task.cpus"] == "2"
    assert conf["spark.executor.resource.gpu.amount"] == "2"
    assert conf["spark.task.resource.gpu.amount"] == "1"
    assert conf["spark.memory.fraction"] == "0.50"
    assert sizing.executor_instances == 2  # 4 tasks / 2 slots per executor


def test_off_heap_memory_is_enabled_when_declared() -> None:
    spec = ResourceSpec(cpu_cores=1, heap_memory="1g", off_heap_memory="256m")
    conf = size_region([StageDemand("a", parallelism=2, resources=spec)], CLUSTER).application_conf()
    assert conf["spark.memory.offHeap.enabled"] == "true"
    assert conf["spark.memory.offHeap.size"] == "1024m"  # 4 slots per executor * 256m


def test_slot_wider_than_the_cluster_is_an_error_naming_the_stages() -> None:
    spec = ResourceSpec(cpu_cores=32, heap_memory="1g")
    with pytest.raises(ValueError, match=r"\['huge'\].*32 cores"):
        size_region([StageDemand("huge", parallelism=1, resources=spec)], CLUSTER)


def test_mixed_specs_in_a_region_are_rejected() -> None:
    spec = ResourceSpec(cpu_cores=1, heap_memory="1g")
    with pytest.raises(ValueError, match=r"'a'.*'b'"):
        size_region([StageDemand("a", 1, resources=spec), StageDemand("b", 1)], CLUSTER)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"total_cores": 0}, "total_cores", id="zero-cores"),
        pytest.param({"executor_memory": "200m"}, "reserved 300 MiB", id="executor-below-reserved"),
        pytest.param({"total_memory": "-1g"}, "negative", id="negative-memory"),
    ],
)
def test_invalid_cluster_profiles(kwargs: dict[str, object], message: str) -> None:
    base: dict[str, object] = {"total_cores": 2, "total_memory": "8g"}
    with pytest.raises(ValueError, match=message):
        ClusterProfile(**{**base, **kwargs})  # type: ignore[arg-type]


# Scan side and shuffle side (a learned work factor corrects only the shuffle side), on CLUSTER (4 cores and
# 4 GiB per executor, at most 4 executors; per task (4096 - 300) MiB x 0.6 / 4 = 569.4 MiB) unless LOCAL:
# (case, profile, demand, shuffle partitions, scan tasks, maxPartitionBytes, executors)
SIDES = [
    # 640 MiB aggregated to one shuffle partition; scans in 10 splits of 64 MiB: 3 executors for the 10.
    ("factor-below-1", CLUSTER, StageDemand("agg", 1, 640 * MiB, memory_expansion=0.01, scan_parallelism=10),
     1, 10, 64 * MiB, 3),
    # 384 MiB that shuffles 4x: 24 partitions (tie on 16 slots up to 32), the scan keeps 6 splits of 64 MiB.
    ("factor-above-1", CLUSTER, StageDemand("explode", 24, 384 * MiB, memory_expansion=0.01, scan_parallelism=6),
     32, 6, 64 * MiB, 4),
    ("zero-bytes", CLUSTER, StageDemand("empty", 1, 0, scan_parallelism=1), 1, 1, MiB, 1),
    # Fixed: sizing moves neither side; the split divides the bytes by the fixed count.
    ("fixed", CLUSTER, StageDemand("fixed", 3, 10 * GiB, fixed=True), 3, 3, -(-10 * GiB // 3), 1),
    # Memory floor ceil(1000 x 3 / 569.4) = 6 raises both sides; then they agree (no scan note).
    ("floor-raises-both", CLUSTER, StageDemand("join", 1, 1000 * MiB, scan_parallelism=4), 6, 6, -(-1000 * MiB // 6),
     2),
    # Floor ceil(10240 x 3 / 569.4) = 54, above max 10: both sides stop at 10.
    ("floor-above-max", CLUSTER, StageDemand("join", 2, 10 * GiB, max_parallelism=10, scan_parallelism=8), 10, 10,
     GiB, 3),
    # Local, 2 slots: the scan's 5 goes to 6 for even waves as a single count did; the shuffle's 1 stays.
    ("scan-even-waves", LOCAL, StageDemand("agg", 1, 320 * MiB, memory_expansion=0.01, scan_parallelism=5), 1, 6,
     -(-320 * MiB // 6), 1),
]  # fmt: skip


@pytest.mark.parametrize(
    ("profile", "demand", "shuffle", "scan", "split", "executors"), [c[1:] for c in SIDES], ids=[c[0] for c in SIDES]
)
def test_the_scan_follows_bytes_on_disk_and_the_shuffle_the_decided_count(
    profile: ClusterProfile, demand: StageDemand, shuffle: int, scan: int, split: int, executors: int
) -> None:
    sizing = size_region([demand], profile)
    stage = sizing.stages[demand.stage]
    assert (stage.parallelism, stage.scan_tasks, stage.max_partition_bytes) == (shuffle, scan, split)
    assert sizing.executor_instances == executors
    assert stage.session_conf() == {
        "spark.sql.shuffle.partitions": str(shuffle),
        "spark.sql.files.maxPartitionBytes": str(split),
    }
    scan_notes = [n for n in stage.notes if n.startswith("scan split")]
    if scan != shuffle:
        assert scan_notes == [
            f"scan split follows the bytes on disk: spark.sql.files.maxPartitionBytes {split} sized for {scan} "
            f"tasks; spark.sql.shuffle.partitions {shuffle} from the corrected decision"
        ]
    else:
        assert scan_notes == []


def test_the_scan_balance_follows_the_scan_count() -> None:
    files = (64 * MiB,) * 10
    demand = StageDemand("agg", 1, sum(files), memory_expansion=0.01, input_file_bytes=files, scan_parallelism=10)
    stage = size_region([demand], CLUSTER).stages["agg"]
    assert stage.balance is not None and stage.balance.max_partition_bytes == 64 * MiB  # 640 MiB / 10, not / 1
    assert stage.session_conf()["spark.sql.shuffle.partitions"] == "1"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"parallelism": 0}, "stage 's': parallelism must be an integer >= 1, got 0"),
        ({"parallelism": 2, "scan_parallelism": 0}, "stage 's': scan_parallelism must be an integer >= 1, got 0"),
        ({"parallelism": 2, "scan_parallelism": True}, "stage 's': scan_parallelism must be an integer >= 1, got True"),
        (
            {"parallelism": 2, "input_row_group_bytes": 0},
            "stage 's': input_row_group_bytes must be an integer >= 1, got 0",
        ),
    ],
)
def test_a_demand_refuses_a_count_below_one(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        StageDemand("s", **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("demand", "expected"),
    [
        # floor ceil(1000 x 3 / 569.4) = 6 raised the stage to 6: AQE keeps at least 6
        pytest.param(StageDemand("join", 1, 1000 * MiB), 6, id="memory-bound"),
        pytest.param(StageDemand("agg", 4, 10 * MiB), 1, id="floor-1-coalesces-freely"),
        # fixed at 3 under a floor of 54: never above the stage's own count
        pytest.param(StageDemand("fixed", 3, 10 * GiB, fixed=True), 3, id="fixed-below-its-floor"),
    ],
)
def test_aqe_may_not_coalesce_below_the_memory_floor(demand: StageDemand, expected: int) -> None:
    assert size_region([demand], CLUSTER).stages[demand.stage].coalesce_floor == expected


# (a slot's GPUs, slots per executor) -> (whole GPUs per executor, GPUs per task), by hand: Spark wants whole
# GPUs per executor, and per task a share of one GPU (floor(1 / amount) tasks use each) or a whole number.
GPU_AMOUNT_CASES = [
    pytest.param(0.0, 2, (0, 0.0), id="none"),
    pytest.param(0.5, 1, (1, 0.5), id="half-on-one-slot-was-0.5-gpus"),
    pytest.param(0.5, 2, (1, 0.5), id="half-on-two-slots-share-one"),
    pytest.param(0.5, 3, (2, 0.5), id="half-on-three-slots-two-gpus"),
    pytest.param(0.25, 4, (1, 0.25), id="quarter-on-four-slots"),
    pytest.param(0.3, 4, (2, 0.3), id="0.3-three-per-gpu-four-slots"),
    pytest.param(1.0, 2, (2, 1.0), id="one-each"),
    pytest.param(1.5, 2, (4, 2.0), id="1.5-rounded-up-to-2-per-task"),
    pytest.param(2.0, 1, (2, 2.0), id="two-each"),
]


@pytest.mark.parametrize(("slot_gpus", "slots", "expected"), GPU_AMOUNT_CASES)
def test_gpu_amounts_are_what_spark_accepts(slot_gpus: float, slots: int, expected: tuple[int, float]) -> None:
    from airflow_provider_finegrained.planning.executor_shape import gpu_amounts

    executor, task = gpu_amounts(slot_gpus, slots)
    assert (executor, task) == expected
    assert float(executor).is_integer() and (task <= 1 or task.is_integer())


GPU_SCRIPT = "/opt/spark/examples/src/main/scripts/getGpusResources.sh"


def test_a_gpu_resource_spec_can_run() -> None:
    # gpus=0.5, 1 cpu, 1g heap per task on 2-core executors: 2 slots share 1 GPU. Heap 2 x 1g + 300m = 2348m,
    # overhead max(384m, 234.8m) = 384m; 4 tasks on 2 slots per executor: 2 executors (8 cores allow 4).
    gpu = ResourceSpec(cpu_cores=1, heap_memory="1g", gpus=0.5)
    profile = ClusterProfile(
        total_cores=8, total_memory=32 * GiB, executor_cores=2, executor_memory=4 * GiB, gpu_discovery_script=GPU_SCRIPT
    )
    sizing = size_region([StageDemand("infer", parallelism=4, resources=gpu)], profile)
    assert sizing.application_conf() == {
        "spark.memory.fraction": "0.60",
        "spark.executor.instances": "2",
        "spark.executor.cores": "2",
        "spark.executor.memory": "2348m",
        "spark.executor.memoryOverhead": "384m",
        "spark.cores.max": "4",
        "spark.task.cpus": "1",
        "spark.executor.resource.gpu.amount": "1",  # was 0.5: Spark refuses a fraction per executor
        "spark.task.resource.gpu.amount": "0.5",
        "spark.executor.resource.gpu.discoveryScript": GPU_SCRIPT,
    }
    # Without GPUs no discovery script is set: Spark refuses one without an amount.
    cpu = ResourceSpec(cpu_cores=1, heap_memory="1g")
    plain = size_region([StageDemand("etl", parallelism=4, resources=cpu)], profile).application_conf()
    assert not [key for key in plain if ".resource.gpu." in key]
