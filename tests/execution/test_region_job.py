"""The application's Spark settings and each stage's AQE settings, as the region job builder makes them."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_finegrained.execution.decision import adaptive_conf, write_options
from airflow_provider_finegrained.execution.region_job import application_conf
from airflow_provider_finegrained.planning import ClusterProfile, ParallelismConfig, StageDemand, size_region
from airflow_provider_finegrained.planning.balance import decide_balance
from airflow_provider_finegrained.settings import ConnectionSettings
from tests.decisions import sized_decision

GiB = 2**30


def settings(host: str, **extra: Any) -> ConnectionSettings:
    return ConnectionSettings.from_connection_fields(host, extra, airflow_home="/srv/airflow")


@pytest.mark.parametrize(
    ("enabled", "expected"),
    [
        (False, {"spark.sql.adaptive.enabled": "false"}),
        (
            True,
            {
                "spark.sql.adaptive.enabled": "true",
                "spark.sql.adaptive.coalescePartitions.parallelismFirst": "false",
                "spark.sql.adaptive.coalescePartitions.minPartitionNum": "1",
                "spark.sql.adaptive.advisoryPartitionSizeInBytes": "1048576",
                # a hot key's partition above 2x the median and the advisory size is split
                "spark.sql.adaptive.skewJoin.enabled": "true",
                "spark.sql.adaptive.skewJoin.skewedPartitionFactor": "2",
                "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": "1048576",
            },
        ),
    ],
)
def test_adaptive_conf(enabled: bool, expected: dict[str, str]) -> None:
    assert adaptive_conf(enabled, ParallelismConfig(avg_bytes_per_task=2**20)) == expected
    # even input files keep the advisory size at the bytes per task
    even = decide_balance([2**20] * 4, 4)
    assert adaptive_conf(enabled, ParallelismConfig(avg_bytes_per_task=2**20), even) == expected


def test_adaptive_conf_keeps_aqe_from_coalescing_below_the_memory_floor() -> None:
    conf = adaptive_conf(True, ParallelismConfig(avg_bytes_per_task=2**20), None, 4)
    assert conf["spark.sql.adaptive.coalescePartitions.minPartitionNum"] == "4"
    assert adaptive_conf(False, ParallelismConfig(avg_bytes_per_task=2**20), None, 4) == {
        "spark.sql.adaptive.enabled": "false"
    }


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        # 40 MiB and 19 of 2 MiB: the big file holds 40/78 of the bytes, advisory 8 MiB x 38/78 -> 4086758
        ([40 * 2**20] + [2 * 2**20] * 19, "4086758"),
        ([8 * 2**20] * 20, str(8 * 2**20)),  # not skewed
    ],
)
def test_adaptive_conf_from_the_measured_spread(files: list[int], expected: str) -> None:
    conf = adaptive_conf(True, ParallelismConfig(avg_bytes_per_task=8 * 2**20), decide_balance(files, 10))
    assert conf["spark.sql.adaptive.advisoryPartitionSizeInBytes"] == expected
    assert conf["spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes"] == expected
    assert conf["spark.sql.adaptive.skewJoin.skewedPartitionFactor"] == "2"
    # with AQE off there is nothing to size
    assert adaptive_conf(False, ParallelismConfig(avg_bytes_per_task=8 * 2**20), decide_balance(files, 10)) == {
        "spark.sql.adaptive.enabled": "false"
    }


@pytest.mark.parametrize(
    ("fmt", "consumer_bytes", "expected"),
    [
        # a quarter of the smallest consumer's bytes per task
        ("parquet", [64 * 2**20, 8 * 2**20], {"parquet.block.size": str(2 * 2**20)}),
        ("parquet", [2**40], {"parquet.block.size": str(128 * 2**20)}),  # never above parquet's default
        ("csv", [8 * 2**20], {}),  # only parquet has row groups
        ("parquet", [], {}),
    ],
)
def test_write_options(fmt: str, consumer_bytes: list[int], expected: dict[str, str]) -> None:
    assert write_options(fmt, [ParallelismConfig(avg_bytes_per_task=b) for b in consumer_bytes]) == expected


def test_application_conf_layers_launcher_connection_and_stages() -> None:
    profile = ClusterProfile(total_cores=4, total_memory=8 * GiB, executor_cores=1, executor_memory=GiB)
    sizing = size_region([StageDemand("s", 4)], profile)
    conn = settings(
        "yarn",
        total_cores=4,
        driver_memory="2g",
        spark_conf={"spark.yarn.queue": "etl", "spark.yarn.maxAppAttempts": "2"},
    )
    launcher_conf = {"spark.yarn.maxAppAttempts": "1", "spark.yarn.submit.waitAppCompletion": "true"}
    stage_confs = [{"spark.sql.shuffle.partitions": "3", "spark.eventLog.enabled": "true"}, {}]
    conf = application_conf(sized_decision(sizing, conn), conn, launcher_conf, stage_confs)
    assert conf["spark.yarn.maxAppAttempts"] == "2"  # the connection's own setting wins over the launcher's
    assert conf["spark.yarn.submit.waitAppCompletion"] == "true"
    assert conf["spark.yarn.queue"] == "etl" and conf["spark.eventLog.enabled"] == "true"
    assert "spark.sql.shuffle.partitions" not in conf  # session settings are the stage's, not the application's
    assert conf["spark.driver.memory"] == "2048m"
    # One executor starts with the application, the rest are asked for at the first job (up to the planned
    # count), so the driver does not wait for them to register before it runs.
    assert "spark.scheduler.minRegisteredResourcesRatio" not in conf
    assert conf["spark.executor.instances"] == conf["spark.dynamicAllocation.initialExecutors"] == "1"
    assert conf["spark.dynamicAllocation.maxExecutors"] == str(sizing.executor_instances)


def test_local_application_conf_sizes_the_driver_as_the_executors() -> None:
    profile = ClusterProfile(total_cores=2, total_memory=4 * GiB, executor_cores=2, executor_memory=GiB, local=True)
    sizing = size_region([StageDemand("s", 2)], profile)
    conf = application_conf(sized_decision(sizing, settings("local[2]")), settings("local[2]"), {}, [])
    assert conf["spark.driver.memory"] == f"{sizing.executor_memory // 2**20}m"
    assert "spark.scheduler.minRegisteredResourcesRatio" not in conf
    assert conf["spark.ui.showConsoleProgress"] == "false"


def test_the_trace_records_the_aqe_sizes_decided_from_the_files() -> None:
    from airflow_provider_finegrained.contract import OutputRecord
    from airflow_provider_finegrained.execution.decision import StageInputs, decide_region
    from airflow_provider_finegrained.planning import StageSpec, plan_stages

    MiB = 2**20
    plan = plan_stages([StageSpec.build("source"), StageSpec.build("join", {"rows": "source"})])
    local = ClusterProfile(total_cores=2, total_memory=6 * 2**30, executor_memory=4 * 2**30, local=True)
    config = ParallelismConfig(avg_bytes_per_task=8 * MiB)
    region = plan.stages["join"].region

    def decided(sizes: list[int]) -> dict[str, Any]:
        record = OutputRecord("source", "/x", "parquet", sizes, 10, 1)
        inputs = {"join": StageInputs(upstream={"rows": record})}
        decision = decide_region(plan, region, inputs, lambda _: config, local)
        balance = decision.traces["join"].input_balance
        assert balance is not None
        adaptive: dict[str, Any] = balance["adaptive"]
        # the trace holds what the region job sets (AQE on)
        expected = adaptive_conf(True, config, decision.sizing.stages["join"].balance)
        assert {k: expected[k] for k in adaptive["settings"]} == adaptive["settings"]
        assert adaptive["applies"] == "only with adaptive_query_execution on"
        return adaptive

    # 40 MiB and 19 of 2 MiB: 8 MiB x 38/78 -> 4086758
    skewed = decided([40 * MiB] + [2 * MiB] * 19)
    assert skewed["skewed_input"] is True
    assert skewed["settings"]["spark.sql.adaptive.advisoryPartitionSizeInBytes"] == "4086758"
    assert "largest file 20.0x the median" in skewed["why"]
    even = decided([4 * MiB] * 20)
    assert even["skewed_input"] is False
    assert even["settings"]["spark.sql.adaptive.advisoryPartitionSizeInBytes"] == str(8 * MiB)
