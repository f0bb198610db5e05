"""Pick the launcher for a region: the warm pool when the region runs warm, else by the master URL's kind."""

from __future__ import annotations

from typing import TYPE_CHECKING

from airflow_provider_finegrained.launchers.base import Launcher, LogLike
from airflow_provider_finegrained.launchers.kubernetes import KubernetesLauncher
from airflow_provider_finegrained.launchers.local import LocalLauncher
from airflow_provider_finegrained.launchers.master import parse_master
from airflow_provider_finegrained.launchers.standalone import StandaloneLauncher
from airflow_provider_finegrained.launchers.submitting import SparkSubmitLauncher
from airflow_provider_finegrained.launchers.warm import WarmLauncher
from airflow_provider_finegrained.launchers.yarn import YarnLauncher

if TYPE_CHECKING:
    from airflow_provider_finegrained.settings.cluster import ClusterSettings
    from airflow_provider_finegrained.warm import WarmPool

SUBMIT_LAUNCHERS: tuple[type[SparkSubmitLauncher], ...] = (
    LocalLauncher,
    StandaloneLauncher,
    YarnLauncher,
    KubernetesLauncher,
)


def submit_launcher(settings: ClusterSettings, log: LogLike | None = None) -> SparkSubmitLauncher:
    """The spark-submit launcher for the connection's master URL."""
    kind = parse_master(settings.master).kind
    for launcher in SUBMIT_LAUNCHERS:
        if kind in launcher.kinds:
            return launcher(settings, log)
    raise ValueError(f"master: no launcher serves {settings.master!r} (kind {kind!r})")  # every kind has one


def select(settings: ClusterSettings, pool: WarmPool | None = None, log: LogLike | None = None) -> Launcher:
    """The launcher of one region run: ``pool`` is the warm pool it runs in (``Carrier.pool``), or None."""
    if pool is not None:
        return WarmLauncher(settings, pool, log)
    return submit_launcher(settings, log)
