"""What a region run needs before its application starts: each stage's parallelism bounds, the region's
decision (``decide_region``, pure, fed from the connection and the stage tasks), a storage Spark can reach,
and the application's Python environment."""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from airflow_provider_finegrained.execution.decision import (
    DecisionSettings,
    RegionDecision,
    StageInputs,
    decide_region,
)
from airflow_provider_finegrained.execution.region_job import StageTaskLike
from airflow_provider_finegrained.launchers.base import Launcher, LogLike
from airflow_provider_finegrained.planning import ClusterProfile, DagPlan, ParallelismConfig
from airflow_provider_finegrained.planning.expansion import LearnedExpansion
from airflow_provider_finegrained.python_env import PackError, python_env_conf, ship_environment
from airflow_provider_finegrained.python_env.ship import cache_folder, needs_python_env
from airflow_provider_finegrained.spark.jvm_start import archive_for_this_host, jvm_start
from airflow_provider_finegrained.spark.submit import spark_home
from airflow_provider_finegrained.storage.classpath import check_spark_filesystem
from airflow_provider_finegrained.storage.errors import StorageConfigError

if TYPE_CHECKING:
    from airflow_provider_finegrained.settings import ConnectionSettings

__all__ = [
    "HostArchive",
    "check_storage_reachable",
    "region_decision",
    "stage_config",
    "with_jvm_start",
    "with_python_env",
]


def stage_config(settings: ConnectionSettings, plan: DagPlan, stage: str) -> ParallelismConfig:
    """The connection's parallelism settings with the stage's own bounds."""
    spec = plan.stages[stage]
    overrides = {
        k: v
        for k, v in (("min_parallelism", spec.min_parallelism), ("max_parallelism", spec.max_parallelism))
        if v is not None
    }
    try:
        return settings.parallelism_config(**overrides)
    except ValueError as exc:
        raise ValueError(f"stage {stage!r}: {exc}") from exc


def region_decision(
    settings: ConnectionSettings,
    plan: DagPlan,
    region: str,
    tasks: Mapping[str, StageTaskLike],
    inputs: Mapping[str, StageInputs],
    profile: ClusterProfile,
    learned: Mapping[str, LearnedExpansion],
    ran_with: Mapping[str, int],
) -> RegionDecision:
    """The region's decision from its inputs, on ``profile``."""
    members = list(plan.regions[region])
    written = [m for m in members if tasks[m].output_path]  # as build_region_job writes them
    return decide_region(
        plan,
        region,
        inputs,
        lambda stage: stage_config(settings, plan, stage),
        profile,
        learned,
        ran_with=ran_with,
        written=written,
        settings=DecisionSettings(
            adaptive_query_execution=settings.adaptive_query_execution,
            stage_spark_conf={m: {k: str(v) for k, v in tasks[m].spark_conf.items()} for m in members},
            output_format={m: tasks[m].output_format for m in members},
            resource_bounds=settings.resource_bounds(),
            executors_from=settings.executors_from,
            jit=settings.jit,
        ),
    )


def check_storage_reachable(
    settings: ConnectionSettings, region: str, members: Sequence[str], stage_confs: Sequence[Mapping[str, Any]]
) -> None:
    """Fail before any work when Spark's classpath has no filesystem for the storage root's scheme."""
    conf: dict[str, str] = {k: str(v) for k, v in settings.spark_conf.items()}
    for stage_conf in stage_confs:
        conf.update({k: str(v) for k, v in stage_conf.items()})
    try:
        check_spark_filesystem(settings.storage_root, spark_home(settings.spark_home), conf)
    except StorageConfigError as exc:
        raise StorageConfigError(f"region {region} (stages {', '.join(members)}): {exc}") from None


def with_python_env(
    settings: ConnectionSettings,
    storage_options: dict[str, Any],
    launcher: Launcher,
    conf: dict[str, str],
    log: LogLike,
    region: str,
) -> dict[str, str]:
    """YARN: the containers run this worker's packed Python environment, unless the user chose a Python."""
    if not launcher.ships_python_env or settings.python_env != "auto" or not needs_python_env(conf):
        return conf
    try:
        archive = ship_environment(settings.storage_root, storage_options, cache_folder())
    except PackError as exc:
        log.warning("Region %s runs with the nodes' own Python: %s", region, exc)
        return conf
    return python_env_conf(conf, archive, settings.deploy_mode, sys.executable)


def with_jvm_start(
    settings: ConnectionSettings, decision: RegionDecision, conf: dict[str, str], archive_here: Path | None
) -> dict[str, str]:
    """The driver's and executors' Java options with the class-data archive where it can be mapped and the
    region's JIT (``spark.jvm_start``) first; the user's own options after them, winning."""
    info = settings.master_info
    start = jvm_start(
        settings.class_archive, archive_here, info.kind, info.is_loopback, settings.deploy_mode, decision.jit
    )
    return start.conf(conf)


class HostArchive:
    """The class-data archive this host's JVMs map, resolved once per region run: its capacity request, launch
    and trace all name the same one, even when a background build finishes meanwhile."""

    def __init__(self, settings: ConnectionSettings) -> None:
        self._settings = settings
        self._found: tuple[Path | None] | None = None

    def path(self) -> Path | None:
        if self._found is None:
            settings = self._settings
            self._found = (archive_for_this_host(settings.class_archive, settings.spark_home, settings.java_home),)
        return self._found[0]
