"""How a region run ends, one value per way: the parts of the sequence return it, nothing raises it.

The capacity step returns a grant, ``AwaitCapacity`` or ``Failed`` (final when no worker can ever hold an
executor); the application step returns ``Failed`` naming the stage that broke; the operator maps the value to
publish, defer or raise (tests/operators, tests/cluster for the deferral to the trigger).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from airflow_provider_finegrained.capacity import CapacityUnavailable
from airflow_provider_finegrained.execution.capacity_gate import CapacityImpossible, Grant
from airflow_provider_finegrained.execution.region_capacity import reserve_capacity
from airflow_provider_finegrained.execution.region_collect import failure_of
from airflow_provider_finegrained.execution.region_errors import StageFailedError
from airflow_provider_finegrained.execution.region_outcome import AwaitCapacity, Failed
from airflow_provider_finegrained.launchers.base import LaunchResult
from airflow_provider_finegrained.launchers.select import submit_launcher
from airflow_provider_finegrained.planning import ClusterProfile, RegionSizing, StageDemand, size_region
from airflow_provider_finegrained.runtime.job import StageStatus
from airflow_provider_finegrained.settings import ConnectionSettings

LOG = logging.getLogger(__name__)
GiB = 2**30


def settings(tmp_path: Path, host: str = "local[4]", **extra: Any) -> ConnectionSettings:
    fields = {"storage_root": str(tmp_path), "total_cores": 4, "total_memory": "32g", **extra}
    return ConnectionSettings.from_connection_fields(host, fields, airflow_home=str(tmp_path))


def sizing(slots: int, cores: int = 1) -> RegionSizing:
    """Stage ``a`` with ``slots`` tasks at once (and ``b`` with one) on executors of ``cores`` cores."""
    profile = ClusterProfile(total_cores=16, total_memory=64 * GiB, executor_cores=cores, executor_memory=GiB)
    return size_region([StageDemand("a", slots), StageDemand("b", 1)], profile)


def reserve(
    config: ConnectionSettings, region_sizing: RegionSizing, key: str = "run-1"
) -> Grant | AwaitCapacity | Failed:
    launcher = submit_launcher(config, LOG)
    minimums = {"a": region_sizing.slots, "b": 1}
    members = ["a", "b"]
    return reserve_capacity(config, {}, launcher, {}, region_sizing, minimums, "region-1", members, key, "app", LOG)


def test_capacity_that_fits_is_a_grant(tmp_path: Path) -> None:
    grant = reserve(settings(tmp_path), sizing(1))
    assert isinstance(grant, Grant)
    grant.release()


def test_a_region_whose_minimum_does_not_fit_now_waits_naming_its_stages(tmp_path: Path) -> None:
    config = settings(tmp_path)
    held = reserve(config, sizing(4))  # 4 of the 4 declared cores
    assert isinstance(held, Grant)
    try:
        waits = reserve(config, sizing(1), key="run-2")
        assert isinstance(waits, AwaitCapacity)
        assert waits.wait.message.startswith("region region-1 (stages a, b): ")
        assert waits.wait.request.executors == 1
    finally:
        held.release()


def test_a_region_no_worker_can_hold_fails_for_good(tmp_path: Path) -> None:
    failed = reserve(settings(tmp_path), sizing(8, cores=8))
    assert isinstance(failed, Failed) and failed.final  # a retry cannot make a worker larger
    assert isinstance(failed.error, CapacityImpossible)
    assert str(failed.error).startswith("region region-1 (stages a, b): ")


def test_capacity_that_cannot_be_read_fails_the_try_naming_the_stages_and_the_master(tmp_path: Path) -> None:
    # A standalone master nobody listens on: its free capacity cannot be read.
    failed = reserve(settings(tmp_path, "spark://127.0.0.1:9", master_webui_url="http://127.0.0.1:9"), sizing(1))
    assert isinstance(failed, Failed) and not failed.final  # Airflow retries it
    assert isinstance(failed.error, CapacityUnavailable)
    assert str(failed.error).startswith("stages 'a', 'b' (region region-1): cannot read the free capacity of ")


def ended(returncode: int) -> LaunchResult:
    return LaunchResult(returncode=returncode, application_id=None, duration_s=1.0, tail=("last line",))


def test_an_application_that_ran_through_is_no_failure() -> None:
    ok = {"a": StageStatus("a", "success")}
    assert failure_of("region-1", ["a"], ok, ended(0), LOG) is None


def test_a_broken_stage_is_a_failure_a_retry_may_mend() -> None:
    broken = {"a": StageStatus("a", "failed", error="division by zero")}
    failed = failure_of("region-1", ["a"], broken, ended(1), LOG)
    assert isinstance(failed, Failed) and not failed.final
    assert isinstance(failed.error, StageFailedError)
    assert str(failed.error).startswith("region region-1 failed in stage 'a': division by zero")
