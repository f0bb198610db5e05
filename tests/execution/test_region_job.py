"""The application's Spark settings and each stage's AQE settings, as the region job builder makes them."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_finegrained.execution.region_job import adaptive_conf, application_conf, write_options
from airflow_provider_finegrained.hooks.settings import ConnectionSettings
from airflow_provider_finegrained.planning import ClusterProfile, ParallelismConfig, StageDemand, size_region

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
    conf = application_conf(sizing, conn, launcher_conf, stage_confs)
    assert conf["spark.yarn.maxAppAttempts"] == "2"  # the connection's own setting wins over the launcher's
    assert conf["spark.yarn.submit.waitAppCompletion"] == "true"
    assert conf["spark.yarn.queue"] == "etl" and conf["spark.eventLog.enabled"] == "true"
    assert "spark.sql.shuffle.partitions" not in conf  # session settings are the stage's, not the application's
    assert conf["spark.driver.memory"] == "2048m"
    assert conf["spark.scheduler.minRegisteredResourcesRatio"] == "1.0"
    assert conf["spark.executor.instances"] == str(sizing.executor_instances)


def test_local_application_conf_sizes_the_driver_as_the_executors() -> None:
    profile = ClusterProfile(total_cores=2, total_memory=4 * GiB, executor_cores=2, executor_memory=GiB, local=True)
    sizing = size_region([StageDemand("s", 2)], profile)
    conf = application_conf(sizing, settings("local[2]"), {}, [])
    assert conf["spark.driver.memory"] == f"{sizing.executor_memory // 2**20}m"
    assert "spark.scheduler.minRegisteredResourcesRatio" not in conf
    assert conf["spark.ui.showConsoleProgress"] == "false"
