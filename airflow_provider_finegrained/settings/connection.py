"""The settings of a ``finegrained_spark`` connection: the concerns' configs composed, and the rules across them.

:class:`ConnectionSettings` is the cluster, storage, resources, parallelism, history and warm-pool configs
together (each declared once, in its own module, and valid alone), plus the rules that span them. A
component receives only the concern it needs, as that concern's own config: ``settings.cluster`` for a
launcher, ``settings.parallelism`` for the parallelism decider, and so on. Flat names
(``settings.master``) stay for callers that need several concerns.

Pure (no Airflow or Spark imports): the hook feeds it a connection's fields and the ``[finegrained]``
section; the planner, the CLI and tests build settings from plain mappings.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, Self

from pydantic import model_validator

from airflow_provider_finegrained.launchers.master import MasterInfo
from airflow_provider_finegrained.planning import (
    ClusterProfile,
    ResourceBounds,
    WorkerShape,
    check_resource_stability,
    format_bytes,
)
from airflow_provider_finegrained.settings.build import connection_values, settable_fields
from airflow_provider_finegrained.settings.cluster import ClusterSettings
from airflow_provider_finegrained.settings.coercion import ConnectionSettingsError
from airflow_provider_finegrained.settings.history import HistorySettings
from airflow_provider_finegrained.settings.parallelism import ParallelismSettings
from airflow_provider_finegrained.settings.resources import (
    MEMORY_OVERHEAD_FACTOR,
    MIN_MEMORY_OVERHEAD,
    MiB,
    ResourceSettings,
)
from airflow_provider_finegrained.settings.storage import StorageSettings
from airflow_provider_finegrained.settings.warm_pool import EMBEDDED_WARM_POOL, WarmPoolSettings

_NO_DEFAULTS: Final[Mapping[str, Any]] = MappingProxyType({})
_RESOURCE_BOUNDS: Final = tuple(field.name for field in dataclasses.fields(ResourceBounds))
"""The minimum and maximum resources: the settings named like ``ResourceBounds``' fields."""


# Reversed MRO is declaration order: cluster, storage, resources, parallelism, history, warm pool (build.CONCERNS).
class ConnectionSettings(
    WarmPoolSettings, HistorySettings, ParallelismSettings, ResourceSettings, StorageSettings, ClusterSettings
):
    """Everything a ``finegrained_spark`` connection says: where Spark runs, its size, the planner's knobs.

    Memory fields are bytes. Construct it with :meth:`from_connection_fields` (coerces strings and
    derives defaults) or directly with typed values; both validate and raise
    :class:`ConnectionSettingsError` naming every bad field at once.
    """

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        problems = self._cross_field_problems()
        if problems:
            raise ConnectionSettingsError(problems)
        return self

    # -- the concerns, each as its own config ---------------------------------------------------

    @property
    def cluster(self) -> ClusterSettings:
        """Where Spark runs and how it is reached: what a launcher receives."""
        return ClusterSettings.of(self)

    @property
    def storage(self) -> StorageSettings:
        """The storage root and its credentials' connection."""
        return StorageSettings.of(self)

    @property
    def resources(self) -> ResourceSettings:
        """Capacity, executor shape, minimum and maximum resources, waiting for capacity."""
        return ResourceSettings.of(self)

    @property
    def parallelism(self) -> ParallelismSettings:
        """The adaptive parallelism decision's knobs: what the parallelism decider receives."""
        return ParallelismSettings.of(self)

    @property
    def history(self) -> HistorySettings:
        """Whether and when stages learn from their past runs."""
        return HistorySettings.of(self)

    @property
    def warm(self) -> WarmPoolSettings:
        """The warm pool: whether regions run in a long-lived Spark Connect server."""
        return WarmPoolSettings.of(self)

    # -- derived views -------------------------------------------------------------------------

    def cluster_profile(self) -> ClusterProfile:
        """What one application may use (capped by the maximum resources); in local mode the driver's
        memory is the executors' memory."""
        cores, memory = self.total_cores, self.total_memory
        for cap in (self.max_slots, None if self.max_cpu is None else math.floor(self.max_cpu)):
            if cap is not None:
                cores = max(1, min(cores, cap))
        if self.max_memory is not None:
            memory = max(1, min(memory, self.max_memory))
        if self.is_local:
            return ClusterProfile(
                total_cores=self.total_cores,
                total_memory=self.total_memory,
                executor_cores=self.total_cores,
                executor_memory=self.driver_memory,
                local=True,
                gpu_discovery_script=self.gpu_discovery_script,
            )
        return ClusterProfile(
            total_cores=cores,
            total_memory=memory,
            executor_cores=self.executor_cores,
            executor_memory=self.executor_memory,
            local=False,
            gpu_discovery_script=self.gpu_discovery_script,
        )

    def redacted(self) -> dict[str, Any]:
        """A JSON-safe dict of all settings with secrets replaced by ``***`` (for logs, XCom, the UI)."""
        return {**super().redacted(), "secret_conf_keys": sorted(self.secret_conf_keys)}

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in super().redacted().items())
        return f"ConnectionSettings({shown})"

    def __str__(self) -> str:
        return repr(self)

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied, validated like a new instance."""
        return type(self)(**{**{name: getattr(self, name) for name in settable_fields()}, **changes})

    # -- construction from a connection -----------------------------------------------------------

    @classmethod
    def embedded_default(cls, *, airflow_home: str, defaults: Mapping[str, Any] = _NO_DEFAULTS) -> Self:
        """Local Spark on this machine's cores, storage under ``airflow_home`` (plus ``defaults``).

        Regions run warm (``warm_pool`` ``auto``) unless ``[finegrained] warm_pool`` says otherwise: on a
        laptop a JVM start per region dominates small stages (docs/warm.md has the figures).
        """
        embedded = {} if "warm_pool" in defaults else {"warm_pool": EMBEDDED_WARM_POOL}
        return cls.from_connection_fields(None, embedded, defaults=defaults, airflow_home=airflow_home)

    @classmethod
    def from_connection_fields(
        cls,
        host: str | None,
        extras: Mapping[str, Any],
        *,
        defaults: Mapping[str, Any] = _NO_DEFAULTS,
        airflow_home: str,
        port: int | None = None,
        password: str | None = None,
    ) -> Self:
        """Coerce and validate a connection's fields over the installation ``defaults``.

        ``host`` holds the master URL (an extra ``master`` is also accepted); ``extras`` and
        ``defaults`` hold the other fields by name, as typed values or as the strings the CLI stores.
        Empty values count as unset. ``port`` is appended to a spark:// or k8s:// host without one;
        ``password`` becomes ``spark.authenticate.secret``. Every problem found is reported at once.
        """
        values = connection_values(
            host, extras, defaults=defaults, airflow_home=airflow_home, port=port, password=password
        )
        return cls(**values)

    # -- validation across fields -----------------------------------------------------------------

    def _cross_field_problems(self) -> list[str]:
        problems: list[str] = []
        info = self.master_info
        if self.deploy_mode == "cluster" and info.kind in ("local", "local-cluster"):
            problems.append(
                f"deploy_mode: 'cluster' is not possible with master {self.master!r} "
                "(Spark runs local masters in the submitting process); allowed: 'client'"
            )
        if info.kind == "local" and info.threads is not None and self.total_cores > info.threads:
            problems.append(
                f"total_cores: {self.total_cores} is more than master {self.master!r} runs "
                f"({info.threads} threads); allowed: at most {info.threads}, or leave it unset"
            )
        if info.kind == "local-cluster":
            problems.extend(self._local_cluster_problems(info))
        if info.kind == "local" and self.admission == "cluster_queue":
            problems.append(
                f"admission: 'cluster_queue' needs a cluster manager that queues applications, and master "
                f"{self.master!r} runs in one JVM; allowed: 'fit_now'"
            )
        if info.kind != "local":
            overhead = max(MIN_MEMORY_OVERHEAD, int(MEMORY_OVERHEAD_FACTOR * self.executor_memory))
            if self.executor_cores > self.total_cores:
                problems.append(
                    f"executor_cores: {self.executor_cores} is more than total_cores ({self.total_cores}); "
                    f"allowed: at most {self.total_cores}"
                )
            if self.total_memory < self.executor_memory + overhead:
                problems.append(
                    f"total_memory: {format_bytes(self.total_memory)} cannot hold one executor of "
                    f"executor_memory {format_bytes(self.executor_memory)} plus {format_bytes(overhead)} overhead; "
                    f"allowed: at least {format_bytes(self.executor_memory + overhead)}"
                )
        try:
            self.parallelism_config()
        except ValueError as exc:
            problems.append(str(exc))
        problems.extend(self._resource_bound_problems())
        return problems

    def _local_cluster_problems(self, info: MasterInfo) -> list[str]:
        problems = []
        if self.executor_cores > info.worker_cores:
            problems.append(
                f"executor_cores: {self.executor_cores} does not fit a worker of {self.master!r} "
                f"({info.worker_cores} cores); allowed: at most {info.worker_cores}"
            )
        if self.executor_memory > info.worker_memory_mib * MiB:
            problems.append(
                f"executor_memory: {format_bytes(self.executor_memory)} does not fit a worker of {self.master!r} "
                f"({info.worker_memory_mib} MiB); allowed: at most {info.worker_memory_mib}m"
            )
        return problems

    def _resource_bound_problems(self) -> list[str]:
        bounds = {name: getattr(self, name) for name in _RESOURCE_BOUNDS}
        set_names = [name for name, value in bounds.items() if value is not None]
        if not set_names:
            return []
        problems = []
        for name, total, unit in (
            ("min_slots", self.total_cores, "total_cores"),
            ("min_cpu", self.total_cores, "total_cores"),
            ("min_memory", self.total_memory, "total_memory"),
        ):
            value = bounds[name]
            if value is not None and value > total:
                shown = format_bytes(value) if name == "min_memory" else f"{value:g}"
                limit = format_bytes(total) if name == "min_memory" else str(total)
                problems.append(f"{name}: {shown} is above {unit} ({limit}), so it can never be met")
        if problems:
            return problems
        profile = self.cluster_profile()
        worker = WorkerShape(
            slots=profile.executor_cores, cpu=float(profile.executor_cores), memory=profile.executor_memory
        )
        try:
            check_resource_stability(self.resource_bounds(), worker)
        except ValueError as exc:
            return [f"{', '.join(set_names)}: {exc}"]
        return []
