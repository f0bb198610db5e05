"""The settings of a ``finegrained_spark`` connection: one typed model, coerced from strings, validated, redactable.

Each setting is declared once, as a field of a per-concern model (cluster, storage, resources,
parallelism, warm pool) with a :class:`~.setting.Setting` as its metadata; :class:`ConnectionSettings`
joins them. The connection form's fields, the ``[finegrained]`` options (``connection_form``) and the
coercion of raw strings all come from those declarations.

Pure (no Airflow imports): the hook feeds it a connection's fields and the ``[finegrained]`` config
section; the planner, the CLI and tests can build settings from plain mappings.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Iterator, Mapping
from types import MappingProxyType
from typing import Annotated, Any, Final, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from airflow_provider_finegrained.hooks import coercion
from airflow_provider_finegrained.hooks.coercion import (
    RESERVED_CONF,
    URL_SCHEME,
    WARM_POOL_MODES,
    ConnectionSettingsError,
    FrozenConf,
    fail,
)
from airflow_provider_finegrained.hooks.setting import (
    Setting,
    boolean,
    byte_size,
    choice,
    integer,
    json_object,
    number,
    string,
)
from airflow_provider_finegrained.launchers.master import MASTER_FORMS, MasterInfo, MasterKind
from airflow_provider_finegrained.launchers.master import parse_master as _parse_master_url
from airflow_provider_finegrained.planning import (
    DEFAULT_AVG_BYTES_PER_TASK,
    ClusterProfile,
    ParallelismConfig,
    ResourceBounds,
    WorkerShape,
    check_resource_stability,
    format_bytes,
)
from airflow_provider_finegrained.planning.parallelism import NORMALIZE_MODES
from airflow_provider_finegrained.secrets import (
    REDACTED,
    SECRET_KEY_PATTERN,
    redact_url,
    url_password,
    url_secrets,
)
from airflow_provider_finegrained.secrets import is_secret_key as is_secret_conf_key

__all__ = [
    "DEPLOY_MODES",
    "EMBEDDED_WARM_POOL",
    "EXTRA_PREFIX",
    "MASTER_FORMS",
    "REDACTED",
    "RESERVED_CONF",
    "SECRET_KEY_PATTERN",
    "WARM_POOL_MODES",
    "ClusterSettings",
    "ConnectionSettings",
    "ConnectionSettingsError",
    "MasterInfo",
    "MasterKind",
    "ParallelismSettings",
    "ResourceSettings",
    "StorageSettings",
    "WarmPoolSettings",
    "available_cpus",
    "field_default",
    "is_secret_conf_key",
    "parse_master",
    "redact_url",
    "settable_fields",
    "setting_of",
    "url_password",
    "url_secrets",
]

MiB: Final = 2**20
GiB: Final = 2**30
SPARK_MIN_MEMORY: Final = 450 * MiB
"""Spark refuses a JVM with less: 1.5 times its 300 MiB reserved memory."""
MEMORY_OVERHEAD_FACTOR: Final = 0.10
MIN_MEMORY_OVERHEAD: Final = 384 * MiB
"""Spark's defaults for ``spark.executor.memoryOverhead`` (also :class:`ClusterProfile`'s)."""

DEPLOY_MODES: Final = ("client", "cluster")
EMBEDDED_WARM_POOL: Final = "auto"
EXTRA_PREFIX: Final = "extra__finegrained_spark__"
"""Prefix of extras written by Airflow's older connection forms; accepted and stripped."""
_NO_DEFAULTS: Final[Mapping[str, Any]] = MappingProxyType({})


def available_cpus() -> int:
    """Cores this process may use: what ``local[*]`` gets (the JVM also honours the affinity mask)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def parse_master(master: str) -> MasterInfo:
    """Parse a Spark master URL (``launchers.master``'s rules); :class:`ConnectionSettingsError` otherwise."""
    try:
        return _parse_master_url(master.strip())
    except ValueError as exc:
        raise ConnectionSettingsError(str(exc)) from None


def _master(where: str, raw: object) -> str:
    value = coercion.text(where, raw)
    try:
        parse_master(value)
    except ConnectionSettingsError as exc:
        fail(str(exc).replace("master: ", f"{where}: ", 1))
    return value


# -- the model, one class per concern -------------------------------------------------------------------


class SettingsModel(BaseModel):
    """Frozen and strict about names; a bad value raises :class:`ConnectionSettingsError` with every problem."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            raise ConnectionSettingsError(_problems(type(self), exc)) from None

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        # Every rendering pydantic offers (repr, str, rich, devtools) goes through here: show no secret.
        for name in type(self).model_fields:
            value = getattr(self, name)
            yield name, redact_url(value) if isinstance(value, str) else value


class ClusterSettings(SettingsModel):
    """Where Spark runs and how it is reached: the master, the Spark and Java installs, its services."""

    master: Annotated[
        str,
        string(
            "Spark master URL",
            f"Where Spark runs; the connection's host field. One of {MASTER_FORMS}.",
            "local[*] or spark://127.0.0.1:7077",
            check=_master,
            default_text="local[N] with N = this machine's cores",
            host_field=True,
        ),
    ]
    deploy_mode: Annotated[
        Literal["client", "cluster"],
        choice(
            "Deploy mode",
            "Where the Spark driver runs: 'client' (in the Airflow task) or 'cluster' (on the cluster: standalone, "
            "YARN, Kubernetes; the task follows the driver and kills it when the task is killed). Local masters "
            "take 'client' only.",
            "client",
            choices=DEPLOY_MODES,
        ),
    ] = "client"
    spark_conf: Annotated[
        Mapping[str, str],
        json_object(
            "Extra Spark conf",
            "JSON object of Spark properties added to every submission. Values of keys containing password, "
            "secret, token, credential or access key, or ending in .key, are masked in logs, XCom and the UI. "
            "Properties the planner decides (executor size, shuffle partitions, memory fraction) are refused.",
            '{"spark.eventLog.enabled": "true"}',
            check=coercion.spark_conf,
            # Only spark_conf: Airflow masks a sensitive option's whole value in every log, and a URL option's
            # value (a storage root, warm_pool=off) is no secret; the secrets inside URLs are masked by the hook.
            sensitive=True,
            default_text="{}",
        ),
    ] = Field(default_factory=lambda: FrozenConf({}))
    spark_home: Annotated[
        str | None,
        string(
            "SPARK_HOME",
            "A Spark installation whose bin/spark-submit runs the stages.",
            "/opt/spark",
            check=coercion.absolute_path,
            default_text="the pip-installed pyspark",
        ),
    ] = None
    java_home: Annotated[
        str | None,
        string(
            "JAVA_HOME",
            "Java 17+ for spark-submit.",
            "/usr/lib/jvm/java-17-openjdk-amd64",
            check=coercion.absolute_path,
            default_text="the worker's JAVA_HOME, else java on PATH",
        ),
    ] = None
    master_webui_url: Annotated[
        str | None,
        string(
            "Master web UI URL",
            "Spark standalone only: the master's web UI, whose /json/ the connection test and capacity checks read.",
            "http://127.0.0.1:8080",
            check=coercion.http_url,
            default_text="port 8080 of the master's host",
        ),
    ] = None
    yarn_resourcemanager_url: Annotated[
        str | None,
        string(
            "YARN ResourceManager URL",
            "YARN only: the ResourceManager's web address, whose REST API (/ws/v1/cluster/nodes, /metrics) tells "
            "the free capacity before a region is submitted. Unset: the declared total_cores/total_memory are used.",
            "http://resourcemanager:8088",
            check=coercion.http_url,
            default_text="none (declared capacity)",
        ),
    ] = None
    history_server_url: Annotated[
        str | None,
        string(
            "Spark history server URL",
            "Where the stage tasks' 'Spark UI' link points once an application has ended (its driver UI is gone "
            "then). Unset: the link goes to the live application's UI only.",
            "http://spark-history:18080",
            check=coercion.http_url,
        ),
    ] = None

    @property
    def master_info(self) -> MasterInfo:
        return parse_master(self.master)

    @property
    def master_kind(self) -> MasterKind:
        """``local``, ``local-cluster``, ``standalone`` (spark://), ``yarn`` or ``k8s``."""
        return self.master_info.kind

    @property
    def is_local(self) -> bool:
        """Spark local mode: one JVM whose threads are the executors (not ``local-cluster``)."""
        return self.master_kind == "local"

    @property
    def secret_conf_keys(self) -> frozenset[str]:
        """Keys of ``spark_conf`` whose values are secrets."""
        return frozenset(k for k in self.spark_conf if is_secret_conf_key(k))

    def webui_json_urls(self) -> list[str]:
        """Standalone masters' ``/json/`` status URLs: ``master_webui_url``, else port 8080 of each master."""
        if self.master_kind != "standalone":
            return []
        if self.master_webui_url:
            base = self.master_webui_url
            return [base if base.endswith("/json") else f"{base}/json/"]
        return [f"http://{host}:8080/json/" for host, _ in self.master_info.hosts]


class StorageSettings(SettingsModel):
    """Where stage outputs live, and whose credentials the Airflow side uses to reach them."""

    storage_root: Annotated[
        str,
        string(
            "Storage root",
            "Where stages write their outputs: an absolute local path or an fsspec URL (s3://bucket/prefix, "
            "gs://, hdfs://, abfs://). Every Airflow worker and Spark executor must reach it.",
            "s3://my-bucket/finegrained",
            check=coercion.storage_root,
            default_text="$AIRFLOW_HOME/finegrained/storage",
        ),
    ]
    storage_conn_id: Annotated[
        str | None,
        string(
            "Storage connection id",
            "The Airflow connection whose credentials the Airflow side uses to read and write the storage root, "
            "as ObjectStoragePath(conn_id=...) takes it (an aws connection for s3://). Unset: the filesystem's "
            "own defaults (environment, instance role).",
            "aws_default",
            check=coercion.conn_id,
        ),
    ] = None

    @property
    def storage_is_local(self) -> bool:
        """Whether ``storage_root`` is a path on this machine's disk (or a ``file://`` URL)."""
        return not URL_SCHEME.match(self.storage_root) or self.storage_root.startswith("file://")

    @property
    def storage_scheme(self) -> str:
        """The storage root's URL scheme, lower case; ``file`` for a local path."""
        return self.storage_root.split("://", 1)[0] if URL_SCHEME.match(self.storage_root) else "file"


class ResourceSettings(SettingsModel):
    """How big one Spark application may be, the executor shape, and the minimum/maximum resources."""

    total_cores: Annotated[
        int,
        integer(
            "Total cores",
            "Cores one Spark application may use. Local masters imply it (N of local[N], this machine's cores "
            "for local[*], N*C for local-cluster[N,C,M]); required for spark://, YARN and Kubernetes.",
            "16",
            minimum=1,
            default_text="implied by a local master; required otherwise",
        ),
    ]
    total_memory: Annotated[
        int,
        byte_size(
            "Total memory",
            "Memory one Spark application may use, as bytes or a size like 64g. Default: driver_memory for "
            "local[...]; N*M MiB for local-cluster[N,C,M]; otherwise total_cores / executor_cores executors of "
            "executor_memory plus Spark's overhead (10%, at least 384 MiB).",
            "64g",
            minimum=1,
            default_text="derived from the master and executor shape",
        ),
    ]
    executor_cores: Annotated[
        int,
        integer(
            "Executor cores",
            "Cores of one executor for stages without a ResourceSpec (ignored by local[...]).",
            "2",
            minimum=1,
            default_text="2 (C for local-cluster[N,C,M])",
        ),
    ] = 2
    executor_memory: Annotated[
        int,
        byte_size(
            "Executor memory",
            "Heap of one executor, like 4g (at least 450m, Spark's minimum). Ignored by local[...], where "
            "driver_memory is all the stages get.",
            "4g",
            minimum=SPARK_MIN_MEMORY,
            why="Spark's minimum for a JVM",
            default_text="2g (M MiB for local-cluster[N,C,M])",
        ),
    ] = 2 * GiB
    driver_memory: Annotated[
        int,
        byte_size(
            "Driver memory",
            "spark.driver.memory, like 2g (at least 450m). In local mode this is the memory the stages get.",
            "2g",
            minimum=SPARK_MIN_MEMORY,
            why="Spark's minimum for a JVM",
        ),
    ] = 2 * GiB
    min_slots: Annotated[
        int | None,
        integer(
            "Minimum slots",
            "Minimum resources: task slots (cores) kept for the pipeline; checked against max_slots in whole "
            "executors.",
            "4",
            minimum=0,
        ),
    ] = None
    max_slots: Annotated[
        int | None,
        integer("Maximum slots", "Maximum resources: task slots (cores) the pipeline may hold.", "32", minimum=0),
    ] = None
    min_memory: Annotated[
        int | None,
        byte_size("Minimum memory", "Minimum resources: executor memory kept for the pipeline, like 8g.", "8g"),
    ] = None
    max_memory: Annotated[
        int | None,
        byte_size("Maximum memory", "Maximum resources: executor memory the pipeline may hold, like 64g.", "64g"),
    ] = None
    min_cpu: Annotated[
        float | None,
        number(
            "Minimum CPU", "Minimum resources: CPU cores kept for the pipeline (may be fractional).", "4", minimum=0
        ),
    ] = None
    max_cpu: Annotated[
        float | None,
        number("Maximum CPU", "Maximum resources: CPU cores the pipeline may hold.", "32", minimum=0),
    ] = None
    capacity_wait_timeout: Annotated[
        float,
        number(
            "Capacity wait timeout (s)",
            "When not even a region's minimum fits the free capacity, its task waits (deferred, holding no worker "
            "slot) this many seconds for capacity to free, then fails naming what it asked and what was free. "
            "0 fails at once.",
            "3600",
            minimum=0,
        ),
    ] = 3600.0
    capacity_poll_interval: Annotated[
        float,
        number(
            "Capacity poll interval (s)",
            "How often a waiting region asks the cluster for its free capacity.",
            "15",
            minimum=0.1,
        ),
    ] = 15.0

    def resource_bounds(self) -> ResourceBounds:
        """The minimum and maximum resources of the connection (unset: no bound)."""
        return ResourceBounds(
            min_slots=self.min_slots or 0,
            max_slots=self.max_slots,
            min_cpu=self.min_cpu or 0,
            max_cpu=self.max_cpu,
            min_memory=self.min_memory or 0,
            max_memory=self.max_memory,
        )


class ParallelismSettings(SettingsModel):
    """The adaptive parallelism decision's knobs (FLIP-187), and Spark's AQE inside each stage."""

    min_parallelism: Annotated[
        int,
        integer("Minimum parallelism", "Lower bound of a stage's adaptive parallelism.", "1", minimum=1),
    ] = 1
    max_parallelism: Annotated[
        int,
        integer("Maximum parallelism", "Upper bound of a stage's adaptive parallelism.", "128", minimum=1),
    ] = 128
    avg_bytes_per_task: Annotated[
        int,
        byte_size(
            "Bytes per task",
            "Upstream bytes one task should read; a stage's parallelism is its input bytes divided by this.",
            "64m",
            minimum=1,
        ),
    ] = DEFAULT_AVG_BYTES_PER_TASK
    max_broadcast_ratio: Annotated[
        float,
        number(
            "Max broadcast ratio",
            "Largest share of a task's bytes that broadcast inputs may count for, in [0, 1).",
            "0.5",
            minimum=0,
            below=1,
        ),
    ] = 0.5
    normalize: Annotated[
        Literal["none", "power_of_two"],
        choice(
            "Normalize parallelism",
            "'none' keeps the computed parallelism; 'power_of_two' rounds it to the nearest power of two.",
            "none",
            choices=NORMALIZE_MODES,
        ),
    ] = "none"
    default_source_parallelism: Annotated[
        int | None,
        integer(
            "Default source parallelism",
            "Parallelism of a source stage whose input size is unknown.",
            "8",
            minimum=1,
            default_text="max_parallelism",
        ),
    ] = None
    adaptive_query_execution: Annotated[
        bool,
        boolean(
            "Adaptive query execution",
            "Keep Spark AQE on inside each stage as a second, in-query correction of the planned parallelism.",
            "true",
        ),
    ] = True

    def parallelism_config(self, **overrides: Any) -> ParallelismConfig:
        """The adaptive-parallelism bounds of these settings, with per-stage ``overrides``."""
        params: dict[str, Any] = {
            "min_parallelism": self.min_parallelism,
            "max_parallelism": self.max_parallelism,
            "avg_bytes_per_task": self.avg_bytes_per_task,
            "default_source_parallelism": self.default_source_parallelism,
            "max_broadcast_ratio": self.max_broadcast_ratio,
            "normalize": self.normalize,
        }
        params.update(overrides)
        return ParallelismConfig(**params)


class WarmPoolSettings(SettingsModel):
    """Whether regions run in a long-lived Spark Connect server instead of one application each."""

    warm_pool: Annotated[
        str,
        string(
            "Warm pool",
            "How regions reach Spark: 'off' starts one application per region with spark-submit; 'auto' runs "
            "them in a long-lived Spark Connect server the provider starts on first use and stops after the idle "
            "timeout; an sc://host:port URL names an existing Spark Connect server (a ;token=... in it is masked "
            "like every secret). A region whose executors do not fit the pool's executor shape runs as its own "
            "application (docs/warm.md).",
            "auto",
            check=coercion.warm_pool,
            default_text="off (the embedded default, with no connection defined: auto)",
        ),
    ] = "off"
    warm_idle_timeout: Annotated[
        float,
        number(
            "Warm pool idle timeout (s)",
            "A pool the provider started stops after this many seconds with no region running; 0 keeps it until "
            "stopped with 'finegrained warm stop'.",
            "600",
            minimum=0,
        ),
    ] = 600.0


# Reversed MRO is declaration order: cluster, storage, resources, parallelism, warm pool.
class ConnectionSettings(WarmPoolSettings, ParallelismSettings, ResourceSettings, StorageSettings, ClusterSettings):
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
            )
        return ClusterProfile(
            total_cores=cores,
            total_memory=memory,
            executor_cores=self.executor_cores,
            executor_memory=self.executor_memory,
            local=False,
        )

    def secret_values(self) -> list[str]:
        """Values to register with a log masker: secret Spark properties, URL passwords and URL tokens."""
        values = [self.spark_conf[k] for k in sorted(self.secret_conf_keys) if self.spark_conf[k]]
        for name in _URL_FIELDS:
            url = getattr(self, name)
            if isinstance(url, str):
                values.extend(url_secrets(url))
        return values

    def redacted(self) -> dict[str, Any]:
        """A JSON-safe dict of all settings with secrets replaced by ``***`` (for logs, XCom, the UI)."""
        out: dict[str, Any] = {}
        for name in settable_fields():
            value = getattr(self, name)
            if name == "spark_conf":
                value = {k: REDACTED if k in self.secret_conf_keys else v for k, v in sorted(value.items())}
            elif isinstance(value, str):
                value = redact_url(value)
            out[name] = value
        out["secret_conf_keys"] = sorted(self.secret_conf_keys)
        return out

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.redacted().items() if k != "secret_conf_keys")
        return f"ConnectionSettings({shown})"

    def __str__(self) -> str:
        return repr(self)

    def replace(self, **changes: Any) -> Self:
        """A copy with ``changes`` applied, validated like a new instance."""
        return type(self)(**{**{name: getattr(self, name) for name in settable_fields()}, **changes})

    # -- construction from a connection -----------------------------------------------------------

    @classmethod
    def embedded_default(cls, *, airflow_home: str, defaults: Mapping[str, Any] = _NO_DEFAULTS) -> ConnectionSettings:
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
    ) -> ConnectionSettings:
        """Coerce and validate a connection's fields over the installation ``defaults``.

        ``host`` holds the master URL (an extra ``master`` is also accepted); ``extras`` and
        ``defaults`` hold the other fields by name, as typed values or as the strings the CLI stores.
        Empty values count as unset. ``port`` is appended to a spark:// or k8s:// host without one;
        ``password`` becomes ``spark.authenticate.secret``. Every problem found is reported at once.
        """
        problems: list[str] = []
        given = _clean(extras, "connection extra", problems)
        installed = _clean(defaults, "[finegrained] option", problems)

        master, master_where = _resolve_master(host, port, given, installed, problems)
        values: dict[str, Any] = {}
        for name in settable_fields():
            if name == "master":
                continue
            spec = setting_of(name)
            sources = [(given, name), (installed, f"[finegrained] {name}")]
            if name == "spark_conf":
                merged: dict[str, str] = {}
                for source, where in reversed(sources):  # the connection's keys win over the installation's
                    if name in source:
                        merged.update(_coerce_into(spec, where, source[name], problems) or {})
                values[name] = merged
                continue
            for source, where in sources:
                if name in source:
                    values[name] = _coerce_into(spec, where, source[name], problems)
                    break

        if password:
            conf = dict(values.get("spark_conf", {}))
            if "spark.authenticate.secret" in conf:
                problems.append("password: both the password field and spark_conf 'spark.authenticate.secret' are set")
            conf["spark.authenticate.secret"] = password
            conf.setdefault("spark.authenticate", "true")
            values["spark_conf"] = conf

        info: MasterInfo | None = None
        if master is not None:
            try:
                info = parse_master(master)
            except ConnectionSettingsError as exc:
                problems.append(exc.problems[0].replace("master: ", f"{master_where}: ", 1))
        if problems:
            raise ConnectionSettingsError(problems)

        if master is None or info is None:
            cpus = available_cpus()
            master = f"local[{cpus}]"
            info = parse_master(master)
        values["master"] = master
        values.setdefault("storage_root", os.path.join(os.path.expanduser(airflow_home), "finegrained", "storage"))
        _derive_capacity(values, info, master, problems)
        if problems:
            raise ConnectionSettingsError(problems)
        return cls(**{k: v for k, v in values.items() if v is not None})

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


_RESOURCE_BOUNDS: Final = ("min_slots", "max_slots", "min_cpu", "max_cpu", "min_memory", "max_memory")
_URL_FIELDS: Final = (
    "master",
    "storage_root",
    "master_webui_url",
    "yarn_resourcemanager_url",
    "history_server_url",
    "warm_pool",
)


def settable_fields() -> tuple[str, ...]:
    """Names a connection (or the ``[finegrained]`` section) may set, in declaration order."""
    return tuple(ConnectionSettings.model_fields)


def setting_of(name: str) -> Setting:
    """The declaration (label, description, kind, coercion...) of the setting ``name``."""
    for item in ConnectionSettings.model_fields[name].metadata:
        if isinstance(item, Setting):
            return item
    raise LookupError(f"{name}: declared without a Setting")  # a field added without metadata: a code bug


def field_default(name: str) -> Any:
    """The model's default of a field (``None`` for derived or required ones)."""
    info = ConnectionSettings.model_fields.get(name)
    if info is None or info.is_required():
        return None
    return info.get_default(call_default_factory=True)


def _problems(model: type[BaseModel], error: ValidationError) -> list[str]:
    """One message per problem pydantic collected: ours as raised, its own (missing, unknown) reworded."""
    problems: list[str] = []
    for item in error.errors(include_url=False):
        cause = item.get("ctx", {}).get("error")
        name = ".".join(str(part) for part in item["loc"])
        if isinstance(cause, ConnectionSettingsError):
            problems.extend(cause.problems)
        elif item["type"] == "missing":
            problems.append(f"{name}: required; allowed: {setting_of(name).description}")
        elif item["type"] == "extra_forbidden":
            problems.append(f"{name}: unknown setting; known: {', '.join(model.model_fields)}")
        else:  # not expected: every field validates with our coercers
            problems.append(f"{name or model.__name__}: {item['msg']}")
    return problems


def _clean(raw: Mapping[str, Any], what: str, problems: list[str]) -> dict[str, Any]:
    """Strip legacy prefixes, drop empty values (unset form fields), and refuse unknown names."""
    known = settable_fields()
    cleaned: dict[str, Any] = {}
    unknown: list[str] = []
    for key, value in raw.items():
        name = key[len(EXTRA_PREFIX) :] if key.startswith(EXTRA_PREFIX) else key
        if name not in known:
            unknown.append(key)
        elif value is not None and not (isinstance(value, str) and not value.strip()):
            cleaned[name] = value
    for key in unknown:
        close = difflib.get_close_matches(key, known, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        problems.append(f"{key}: unknown {what}{hint}; known: {', '.join(known)}")
    return cleaned


def _coerce_into(spec: Setting, where: str, raw: object, problems: list[str]) -> Any:
    try:
        return spec.parse(where, raw)
    except ConnectionSettingsError as exc:
        problems.extend(exc.problems)
        return None


def _resolve_master(
    host: str | None, port: int | None, given: dict[str, Any], installed: dict[str, Any], problems: list[str]
) -> tuple[str | None, str]:
    """The master URL and the name of the field it came from (host, extra, config, or none)."""
    from_host = host.strip() if host and host.strip() else None
    from_extra = given.pop("master", None)
    from_config = installed.pop("master", None)
    if from_host and port and from_host.startswith(("spark://", "k8s://")) and not re.search(r":\d+$", from_host):
        from_host = f"{from_host}:{port}"
    if from_host and from_extra is not None and str(from_extra).strip() != from_host:
        problems.append(
            f"master: the host field ({from_host!r}) and the extra 'master' ({from_extra!r}) disagree; set one of them"
        )
    for value, where in ((from_host, "master"), (from_extra, "master"), (from_config, "[finegrained] master")):
        if value is not None:
            if not isinstance(value, str):
                problems.append(f"{where}: {value!r} is not a Spark master URL; allowed: {MASTER_FORMS}")
                return None, where
            return value.strip(), where
    return None, "master"


def _derive_capacity(values: dict[str, Any], info: MasterInfo, master: str, problems: list[str]) -> None:
    """Fill total_cores, total_memory (and local-cluster's executor shape) when they are not given."""
    if info.kind == "local-cluster":
        values.setdefault("executor_cores", info.worker_cores)
        values.setdefault("executor_memory", info.worker_memory_mib * MiB)
    if values.get("total_cores") is None:
        if info.kind == "local":
            values["total_cores"] = info.threads or available_cpus()
        elif info.kind == "local-cluster":
            values["total_cores"] = info.workers * info.worker_cores
        else:
            problems.append(
                f"total_cores: required for master {master!r}; allowed: the cores one Spark application may use "
                "(an integer >= 1, e.g. 16); only local masters imply it"
            )
            return
    if values.get("total_memory") is None:
        if info.kind == "local":
            values["total_memory"] = values.get("driver_memory") or field_default("driver_memory")
        elif info.kind == "local-cluster":
            values["total_memory"] = info.workers * info.worker_memory_mib * MiB
        else:
            # Enough for total_cores worth of default-shaped executors, with Spark's default overhead.
            cores = values.get("executor_cores") or field_default("executor_cores")
            memory = values.get("executor_memory") or field_default("executor_memory")
            overhead = max(MIN_MEMORY_OVERHEAD, int(MEMORY_OVERHEAD_FACTOR * memory))
            values["total_memory"] = max(1, values["total_cores"] // cores) * (memory + overhead)
