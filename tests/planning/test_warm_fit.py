"""Warm or cold, worked by hand: a pool slot has (executor memory - 300 MiB) / cores of heap and that
times the memory fraction of Spark memory; a region fits when each of its slots needs no more."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_finegrained.planning.sizing import RegionSizing
from airflow_provider_finegrained.planning.warm_fit import PoolShape, decide_warm_fit, static_settings

MiB, GiB = 2**20, 2**30
# Slots of 874.0 MiB heap ((2048 - 300) / 2) and 524.4 MiB of Spark memory (x 0.6); 4 slots.
POOL = PoolShape(executor_cores=2, executor_memory=2 * GiB, max_executors=2)


def sizing(**changes: Any) -> RegionSizing:
    base: dict[str, Any] = {
        "executor_instances": 2,
        "executor_cores": 2,
        "task_cpus": 1,
        "executor_memory": 2 * GiB,
        "memory_overhead": 384 * MiB,
        "memory_fraction": 0.6,
        "off_heap_memory": 0,
        "executor_gpus": 0,
        "task_gpus": 0,
        "local": False,
    }
    return RegionSizing(**{**base, **changes})


@pytest.mark.parametrize(
    ("region", "warm", "reason"),
    [
        # The connection's own shape: the pool was started from the same settings.
        (sizing(), True, "every slot fits the pool's executors: up to 2 executor(s) of 2 core(s), 2.0 GiB"),
        # 8 slots asked, 4 in the pool: same tasks, two waves.
        (sizing(executor_instances=4), True, "(its 8 slots run in 2 waves on the pool's 4)"),
        # Smaller slots fit: (1024 - 300) / 1 = 724 MiB <= 874 MiB.
        (sizing(executor_cores=1, executor_memory=GiB), True, "every slot fits"),
        # (4096 - 300) / 2 = 1898 MiB of heap per slot.
        (sizing(executor_memory=4 * GiB), False, "a slot needs 1.9 GiB of heap, the pool's slots have 874.0 MiB"),
        # One core per executor: (2048 - 300) / 1 = 1748 MiB.
        (sizing(executor_cores=1), False, "a slot needs 1.7 GiB of heap"),
        # Same heap, more of it as Spark memory: 874 x 0.9 = 786.6 MiB > 524.4 MiB.
        (
            sizing(memory_fraction=0.9),
            False,
            "a slot needs 786.6 MiB of Spark memory (fraction 0.90), the pool's slots have 524.4 MiB",
        ),
        (sizing(task_cpus=2), False, "each task needs 2 cores (the pool's tasks take 1)"),
        (sizing(executor_gpus=1, task_gpus=1), False, "executors need 1 GPU(s), the pool's have 0"),
        (sizing(off_heap_memory=512 * MiB), False, "executors need 512.0 MiB off-heap, the pool's have none"),
    ],
)
def test_region_against_pool(region: RegionSizing, warm: bool, reason: str) -> None:
    fit = decide_warm_fit(region, POOL)
    assert fit.warm is warm
    assert reason in fit.reason
    if not warm:
        assert fit.reason.endswith("the pool runs up to 2 executor(s) of 2 core(s), 2.0 GiB, memory fraction 0.60")


def test_local_pool_is_one_jvm() -> None:
    pool = PoolShape(executor_cores=2, executor_memory=2 * GiB, local=True)
    fit = decide_warm_fit(sizing(executor_instances=1, local=True), pool)
    assert fit == decide_warm_fit(sizing(executor_instances=1, local=True), pool)
    assert fit.warm and "local JVM of 2 core(s), 2.0 GiB" in fit.reason


def test_unknown_pool_is_trusted() -> None:
    fit = decide_warm_fit(sizing(executor_memory=64 * GiB), None)
    assert fit.warm and "existing Spark Connect server" in fit.reason


def test_stage_asking_for_cold_wins() -> None:
    fit = decide_warm_fit(sizing(), POOL, cold_stages=["load"])
    assert not fit.warm and fit.reason == "stage(s) load ask for an application of their own (warm=False)"


def test_static_settings_need_a_fresh_application() -> None:
    conf = {"spark.sql.shuffle.partitions": "8", "spark.executor.memoryOverhead": "1g", "spark.memory.fraction": "0.8"}
    keys = static_settings(conf)
    assert keys == ["spark.executor.memoryOverhead", "spark.memory.fraction"]
    fit = decide_warm_fit(sizing(), POOL, static_conf={"join": keys, "scan": []})
    assert not fit.warm
    assert fit.reason == (
        "join sets spark.executor.memoryOverhead, spark.memory.fraction: settings a running application cannot change"
    )
