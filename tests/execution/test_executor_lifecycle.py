"""A region's executors on a cluster: dynamic allocation bounded by the decision and the minimum resources."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_finegrained.execution.executor_lifecycle import (
    executor_lifecycle_conf,
    lifecycle_text,
    starts_on_every_executor,
)
from airflow_provider_finegrained.execution.region_job import application_conf
from airflow_provider_finegrained.planning import ClusterProfile, RegionSizing, StageDemand, size_region
from airflow_provider_finegrained.planning.capacity import EXECUTOR_IDLE_TIMEOUT_S, ResourceBounds
from airflow_provider_finegrained.settings import ConnectionSettings
from tests.decisions import sized_decision

GiB = 2**30
DA = "spark.dynamicAllocation."
IDLE, SHUFFLE = f"{DA}executorIdleTimeout", f"{DA}shuffleTracking.timeout"


def sizing(
    executors: int, cores: int = 2, task_cpus: int = 1, memory: int = 4 * GiB, local: bool = False
) -> RegionSizing:
    return RegionSizing(
        executor_instances=executors,
        executor_cores=cores,
        task_cpus=task_cpus,
        executor_memory=memory,
        memory_overhead=410 * 2**20,
        memory_fraction=0.6,
        off_heap_memory=0,
        executor_gpus=0,
        task_gpus=0,
        local=local,
    )


def bounds_of(conf: dict[str, str]) -> tuple[int, int, int]:
    return (int(conf[f"{DA}minExecutors"]), int(conf[f"{DA}initialExecutors"]), int(conf[f"{DA}maxExecutors"]))


# (bounds, sizing, expected min, initial, max executors) worked by hand: without a minimum the region
# keeps none and starts with one (the others are asked for at the first job), never exceeding its
# planned executors; a minimum needs ceil(min / per-executor) executors (slots are cores // task_cpus)
# and starts with them, within the planned count (what the capacity gate admitted); the maximum executors
# are the planned count, capped by floor(max / per-executor).
@pytest.mark.parametrize(
    ("bounds", "region", "expected"),
    [
        pytest.param(ResourceBounds(), sizing(3), (0, 1, 3), id="no-minimum-keeps-none-starts-one"),
        pytest.param(ResourceBounds(), sizing(1), (0, 1, 1), id="one-executor"),
        pytest.param(ResourceBounds(max_slots=4), sizing(2), (0, 1, 2), id="only-a-maximum-above-planned"),
        pytest.param(ResourceBounds(max_slots=4), sizing(3), (0, 1, 2), id="only-a-maximum-caps-planned"),
        pytest.param(ResourceBounds(min_slots=4), sizing(3), (2, 2, 3), id="min-below-planned"),
        pytest.param(ResourceBounds(min_slots=6), sizing(2), (2, 2, 2), id="min-above-planned-kept-within-it"),
        pytest.param(ResourceBounds(min_slots=6, max_slots=8), sizing(5), (3, 3, 4), id="max-caps-planned"),
        pytest.param(ResourceBounds(min_slots=1), sizing(1, cores=4, task_cpus=2), (1, 1, 1), id="two-cpu-tasks"),
        pytest.param(ResourceBounds(min_memory=10 * GiB), sizing(1), (1, 1, 1), id="memory-minimum-10g-over-4g"),
        pytest.param(ResourceBounds(min_memory=10 * GiB), sizing(4), (3, 3, 4), id="memory-minimum-within-planned"),
        pytest.param(ResourceBounds(min_cpu=3, max_cpu=8), sizing(6), (2, 2, 4), id="cpu-bounds"),
    ],
)
def test_cluster_regions_run_with_dynamic_allocation_bounded_by_the_decision(
    bounds: ResourceBounds, region: RegionSizing, expected: tuple[int, int, int]
) -> None:
    conf = executor_lifecycle_conf(bounds, region)
    assert bounds_of(conf) == expected
    assert conf[f"{DA}enabled"] == "true"
    # No external shuffle service assumed: shuffle tracking, and its timeout so that an executor holding only
    # finished jobs' shuffle data leaves too (Spark's default keeps it until the driver's GC cleans the shuffle).
    assert conf[f"{DA}shuffleTracking.enabled"] == "true"
    assert conf[f"{DA}shuffleTracking.timeout"] == conf[f"{DA}executorIdleTimeout"] == f"{EXECUTOR_IDLE_TIMEOUT_S}s"
    # Spark starts max(min, initial, executor.instances) executors; standalone caps by cores.max.
    assert conf["spark.executor.instances"] == str(expected[1])
    assert int(conf["spark.cores.max"]) == expected[2] * region.executor_cores
    assert f"{DA}cachedExecutorIdleTimeout" not in conf  # Spark's default: a cached handover is kept


@pytest.mark.parametrize(
    ("bounds", "region", "expected"),
    [
        pytest.param(ResourceBounds(), sizing(3), (0, 3, 3), id="no-minimum"),
        pytest.param(ResourceBounds(min_slots=4), sizing(3), (2, 3, 3), id="min-below-planned"),
        pytest.param(ResourceBounds(min_slots=6, max_slots=8), sizing(5), (3, 4, 4), id="max-caps-planned"),
    ],
)
def test_executors_from_start_asks_for_every_executor_at_the_start(
    bounds: ResourceBounds, region: RegionSizing, expected: tuple[int, int, int]
) -> None:
    conf = executor_lifecycle_conf(bounds, region, "start")
    assert bounds_of(conf) == expected
    assert conf["spark.executor.instances"] == str(expected[1])
    assert starts_on_every_executor(conf)


@pytest.mark.parametrize(
    ("bounds", "region", "expected"),
    [
        pytest.param(ResourceBounds(), sizing(3), (0, 0, 3), id="no-minimum-none-at-the-start"),
        pytest.param(ResourceBounds(min_slots=4), sizing(3), (2, 2, 3), id="a-minimum-is-asked-for-at-the-start"),
    ],
)
def test_executors_from_the_first_job_asks_for_none_before_it(
    bounds: ResourceBounds, region: RegionSizing, expected: tuple[int, int, int]
) -> None:
    conf = executor_lifecycle_conf(bounds, region, "first_job")
    assert bounds_of(conf) == expected
    assert conf["spark.executor.instances"] == str(expected[1])
    assert not starts_on_every_executor(conf)


def test_local_mode_has_no_executors_to_give_back() -> None:
    assert executor_lifecycle_conf(ResourceBounds(min_slots=2), sizing(1, local=True)) == {}


def test_unstable_bounds_are_refused_with_the_numbers() -> None:
    with pytest.raises(ValueError, match=r"unstable minimum/maximum resources: min slots 5 needs 3 worker"):
        executor_lifecycle_conf(ResourceBounds(min_slots=5, max_slots=5), sizing(2))


def settings(host: str, **extra: Any) -> ConnectionSettings:
    return ConnectionSettings.from_connection_fields(host, extra, airflow_home="/srv/airflow")


LIFE = "30 s"
CLUSTER = ClusterProfile(total_cores=4, total_memory=8 * GiB, executor_cores=1, executor_memory=GiB)
RATIO = "spark.scheduler.minRegisteredResourcesRatio"


# (host, connection extra, dynamic allocation, executors at the start, the first wave waits for all: the
# ratio, the trace's text). A fixed count or executors_from="start" asks for every executor at the start, so
# the first wave waits for all (FLIP-370); by default they come at the first job and nothing waits.
START = f"up to 4, released when idle {LIFE}"
FIRST_JOB = f"up to 4 from the first job, released when idle {LIFE}"
ONE_FIRST = f"1 at the start, {FIRST_JOB}"
SA = "spark://m:7077"
ALL_AT_START = {"spark_conf": {f"{DA}initialExecutors": "4"}}
LOWER_RATIO = {"executors_from": "start", "spark_conf": {RATIO: "0.5"}}


@pytest.mark.parametrize(
    ("host", "extra", "expected_da", "initial", "ratio", "text"),
    [
        pytest.param(SA, {}, "true", "1", None, ONE_FIRST, id="standalone"),
        pytest.param("k8s://https://k:6443", {}, "true", "1", None, ONE_FIRST, id="kubernetes"),
        pytest.param("yarn", {"min_slots": 2}, "true", "2", None, f"2 at the start, {FIRST_JOB}, 2 kept",
                     id="yarn-minimum"),
        pytest.param(SA, {"spark_conf": {f"{DA}enabled": "false"}}, "false", "1", "1.0", "", id="conf-turns-it-off"),
        pytest.param(SA, {"executors_from": "start"}, "true", "4", "1.0", START, id="executors-from-start"),
        pytest.param(SA, ALL_AT_START, "true", "4", "1.0", START, id="conf-starts-on-all"),
        pytest.param(SA, LOWER_RATIO, "true", "4", "0.5", START, id="conf-ratio"),
        pytest.param(
            SA,
            {"spark_conf": {f"{DA}executorIdleTimeout": "1min", f"{DA}shuffleTracking.timeout": "60000"}},
            "true", "1", None, "1 at the start, up to 4 from the first job, released when idle 60 s",
            id="conf-sets-the-timeouts",
        ),
    ],
)  # fmt: skip
def test_the_application_conf_carries_it_and_the_connection_wins(
    host: str, extra: dict[str, Any], expected_da: str, initial: str, ratio: str | None, text: str
) -> None:
    region = size_region([StageDemand("wide", 4)], CLUSTER)
    conn = settings(host, total_cores=4, **extra)
    conf = application_conf(sized_decision(region, conn), conn, {}, [])
    assert conf[f"{DA}enabled"] == expected_da
    assert conf[f"{DA}maxExecutors"] == "4" and conf["spark.cores.max"] == "4"
    assert conf[f"{DA}initialExecutors"] == initial
    # Standalone waits for spark.cores.max at the driver's start with a ratio: none unless all are asked for.
    assert conf.get(RATIO) == ratio
    assert lifecycle_text(conf) == text


@pytest.mark.parametrize(
    ("conf", "expected"),
    [
        ({}, True),  # no dynamic allocation: a fixed count
        ({f"{DA}enabled": "false", f"{DA}initialExecutors": "0", f"{DA}maxExecutors": "4"}, True),
        ({f"{DA}enabled": "true", f"{DA}initialExecutors": "0", f"{DA}maxExecutors": "4"}, False),
        ({f"{DA}enabled": "true", f"{DA}initialExecutors": "3", f"{DA}maxExecutors": "4"}, False),
        ({f"{DA}enabled": " TRUE ", f"{DA}initialExecutors": "4", f"{DA}maxExecutors": "4"}, True),
        ({f"{DA}enabled": "true", f"{DA}maxExecutors": "4"}, False),  # Spark's initial is the minimum, 0
        ({f"{DA}enabled": "true", f"{DA}initialExecutors": "many", f"{DA}maxExecutors": "4"}, False),
    ],
)
def test_starts_on_every_executor_only_when_all_are_asked_for_at_the_start(
    conf: dict[str, str], expected: bool
) -> None:
    assert starts_on_every_executor(conf) is expected


def test_a_local_application_conf_has_no_dynamic_allocation() -> None:
    profile = ClusterProfile(total_cores=2, total_memory=4 * GiB, executor_cores=2, executor_memory=GiB, local=True)
    conn = settings("local[2]")
    conf = application_conf(sized_decision(size_region([StageDemand("s", 2)], profile), conn), conn, {}, [])
    assert not any(k.startswith(DA) for k in conf)
    assert lifecycle_text(conf) == ""


ON = {f"{DA}enabled": "true"}


@pytest.mark.parametrize(
    ("conf", "text"),
    [
        ({}, ""),
        ({f"{DA}enabled": "false", f"{DA}maxExecutors": "4"}, ""),
        (
            {f"{DA}enabled": "TRUE", f"{DA}maxExecutors": "4", IDLE: "15s"},
            "up to 4 from the first job, released when idle 15 s, kept while holding shuffle data",  # no timeout
        ),
        ({**ON, f"{DA}maxExecutors": "2", SHUFFLE: "60s"}, "up to 2 from the first job, released when idle 60 s"),
        (
            {**ON, f"{DA}maxExecutors": "2", f"{DA}initialExecutors": "2", SHUFFLE: "60s"},
            "up to 2, released when idle 60 s",  # all asked for at the start
        ),
        (
            {**ON, IDLE: "500ms", SHUFFLE: "500"},
            "released when idle 0.5 s",
        ),
        (
            {**ON, IDLE: "30", SHUFFLE: "2min"},  # bare: s and ms
            "released when idle 120 s (30 s without shuffle data)",
        ),
        (
            {**ON, IDLE: "2h", f"{DA}shuffleTracking.enabled": "false"},
            "released when idle 7200 s",
        ),
        (
            {**ON, IDLE: "soon", "spark.shuffle.service.enabled": "true"},
            "released when idle soon",
        ),
        (
            {**ON, f"{DA}maxExecutors": "4", f"{DA}minExecutors": "1", SHUFFLE: "1min"},
            "up to 4 from the first job, released when idle 60 s, 1 kept",
        ),
    ],
)
def test_lifecycle_text(conf: dict[str, str], text: str) -> None:
    assert lifecycle_text(conf) == text


def test_the_run_page_says_how_the_executors_come_and_go() -> None:
    from airflow_provider_finegrained.ui.model import stage_row
    from tests.ui.plans import trace

    conf = executor_lifecycle_conf(ResourceBounds(), sizing(4))
    row = stage_row("wide", None, trace("wide", {"x": 1}, 4, executors=4, spark_conf=conf), None, "success")
    assert row.executors_text == f"4 × 2 cores ({ONE_FIRST})"
    fixed = stage_row("wide", None, trace("wide", {"x": 1}, 4, executors=4), None, "success")
    assert fixed.executors_text == "4 × 2 cores"
