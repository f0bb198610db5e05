"""Each component receives only the concern it needs: the configs composed into a connection's settings."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_finegrained.launchers.base import LaunchHandle
from airflow_provider_finegrained.launchers.remote import RemoteApplication
from airflow_provider_finegrained.launchers.select import select, submit_launcher
from airflow_provider_finegrained.settings import (
    CONCERNS,
    ClusterSettings,
    ConnectionSettings,
    HistorySettings,
    ParallelismSettings,
    ResourceSettings,
    SettingsModel,
    StorageSettings,
    WarmPoolSettings,
    concern_of,
    settable_fields,
)

HOME = "/srv/airflow"
STANDALONE = "spark://127.0.0.1:7077"


def connection(host: str = STANDALONE, **extras: Any) -> ConnectionSettings:
    extras.setdefault("total_cores", 8)
    return ConnectionSettings.from_connection_fields(host, extras, airflow_home=HOME)


def test_the_connection_settings_are_the_concerns_composed() -> None:
    assert tuple(ConnectionSettings.model_fields) == settable_fields()
    assert all(issubclass(ConnectionSettings, concern) for concern in CONCERNS)
    for name in settable_fields():
        assert name in concern_of(name).model_fields


@pytest.mark.parametrize(
    ("view", "concern"),
    [
        ("cluster", ClusterSettings),
        ("storage", StorageSettings),
        ("resources", ResourceSettings),
        ("parallelism", ParallelismSettings),
        ("history", HistorySettings),
        ("warm", WarmPoolSettings),
    ],
)
def test_each_concern_is_handed_out_as_its_own_config(view: str, concern: type[SettingsModel]) -> None:
    settings = connection(max_parallelism=16, storage_root="s3://bucket/fg", warm_pool="off", history_min_runs=5)
    part = getattr(settings, view)
    assert type(part) is concern
    assert part.model_dump() == {name: getattr(settings, name) for name in concern.model_fields}
    others = set(settable_fields()) - set(concern.model_fields)
    assert not any(hasattr(part, name) for name in others), "a concern carries no other concern's settings"
    with pytest.raises(Exception, match="frozen"):
        setattr(part, next(iter(concern.model_fields)), None)


def test_a_concern_of_a_concern_is_itself() -> None:
    cluster = connection().cluster
    assert ClusterSettings.of(cluster) is cluster


def test_the_parallelism_decider_gets_its_bounds_from_the_parallelism_settings_alone() -> None:
    parallelism = connection(min_parallelism=2, max_parallelism=16, normalize="power_of_two").parallelism
    config = parallelism.parallelism_config(max_parallelism=8)
    assert (config.bounds, config.normalize) == ((2, 8), "power_of_two")


@pytest.mark.parametrize(
    ("host", "launcher"),
    [("local[8]", "local"), (STANDALONE, "standalone"), ("yarn", "yarn"), ("k8s://https://api:6443", "kubernetes")],
)
def test_a_launcher_receives_the_cluster_settings_only(host: str, launcher: str) -> None:
    settings = connection(host)
    assert select(settings).name == launcher
    assert type(submit_launcher(settings).settings) is ClusterSettings
    assert not hasattr(submit_launcher(settings).settings, "storage_root")
    assert submit_launcher(settings.cluster).settings == settings.cluster


def test_a_followed_application_receives_the_cluster_settings_only() -> None:
    handle = LaunchHandle("standalone", "dag.r1", driver_id="driver-20261124030000-0007", deploy_mode="cluster")
    remote = RemoteApplication(connection(), handle)
    assert type(remote.settings) is ClusterSettings
