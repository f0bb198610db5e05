"""``local[...]`` and ``local-cluster[...]``: the application runs on this machine, in client mode."""

from __future__ import annotations

import os

from airflow_provider_finegrained.launchers.base import CapacityKind, LaunchSpec
from airflow_provider_finegrained.launchers.master import MasterKind
from airflow_provider_finegrained.launchers.submitting import SparkSubmitLauncher


class LocalLauncher(SparkSubmitLauncher):
    """spark-submit of a local master: the driver (and local-cluster's executors) are processes of this task."""

    name = "local"
    kinds: frozenset[MasterKind] = frozenset({"local", "local-cluster"})
    capacity_kind: CapacityKind = "local"
    count_overhead = True

    def env(self, spec: LaunchSpec) -> dict[str, str]:
        env = super().env(spec)
        # Loopback only: the machine's hostname may resolve to an address Spark cannot bind.
        env.setdefault("SPARK_LOCAL_IP", os.environ.get("SPARK_LOCAL_IP", "127.0.0.1"))
        return env
