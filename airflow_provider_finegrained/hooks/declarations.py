"""Every ``finegrained_spark`` connection setting, declared once, in one frozen pydantic model per concern.

Cluster (where Spark runs and how it is reached), storage, resources, parallelism and the warm pool. A
field's :class:`~.setting.Setting` metadata is its label, description, example, kind and coercion: the
connection form, the ``[finegrained]`` options and the coercion of raw strings are all read from it.
:class:`~.settings.ConnectionSettings` joins the concerns and adds the rules across them. No Airflow imports.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from airflow_provider_finegrained.hooks import coercion
from airflow_provider_finegrained.hooks.coercion import URL_SCHEME, ConnectionSettingsError, FrozenConf, fail
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
from airflow_provider_finegrained.planning import DEFAULT_AVG_BYTES_PER_TASK, ParallelismConfig, ResourceBounds
from airflow_provider_finegrained.planning.history import DEFAULT_MIN_RUNS as DEFAULT_HISTORY_MIN_RUNS
from airflow_provider_finegrained.planning.parallelism import NORMALIZE_MODES
from airflow_provider_finegrained.secrets import is_secret_key as is_secret_conf_key
from airflow_provider_finegrained.secrets import redact_url

MiB: Final = 2**20
GiB: Final = 2**30
EXECUTOR_STARTS: Final = ("first_job", "start")
"""``executors_from``: when a region's application on a cluster asks for its executors."""
ADMISSIONS: Final = ("fit_now", "cluster_queue")
"""``admission``: how a region on a cluster is let in (``planning.capacity``'s two decisions)."""
SPARK_MIN_MEMORY: Final = 450 * MiB
"""Spark refuses a JVM with less: 1.5 times its 300 MiB reserved memory."""
MEMORY_OVERHEAD_FACTOR: Final = 0.10
MIN_MEMORY_OVERHEAD: Final = 384 * MiB
"""Spark's defaults for ``spark.executor.memoryOverhead`` (also :class:`ClusterProfile`'s)."""

DEPLOY_MODES: Final = ("client", "cluster")
PYTHON_ENVS: Final = ("auto", "off")
"""``python_env``: whether YARN's containers get the Airflow worker's packed environment."""
EMBEDDED_WARM_POOL: Final = "auto"
EXTRA_PREFIX: Final = "extra__finegrained_spark__"
"""Prefix of extras written by Airflow's older connection forms; accepted and stripped."""


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
    hadoop_conf_dir: Annotated[
        str | None,
        string(
            "Hadoop configuration folder",
            "YARN and HDFS: the folder with the cluster's core-site.xml, hdfs-site.xml and yarn-site.xml on the "
            "Airflow worker. spark-submit gets it as HADOOP_CONF_DIR and YARN_CONF_DIR; the Airflow side reads the "
            "NameNode's web address (dfs.namenode.http-address) from it to reach an hdfs:// storage root.",
            "/etc/hadoop/conf",
            check=coercion.absolute_path,
            default_text="the worker's HADOOP_CONF_DIR",
        ),
    ] = None
    python_env: Annotated[
        Literal["auto", "off"],
        choice(
            "Python environment",
            "YARN only: 'auto' packs the Airflow worker's virtual environment once per content hash, keeps it in "
            "the storage root's _python folder and has every container run its Python (spark.archives, "
            "spark.pyspark.python), unless spark_conf sets spark.pyspark.python; 'off' leaves the nodes' own Python.",
            "auto",
            choices=PYTHON_ENVS,
        ),
    ] = "auto"
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
    total_gpus: Annotated[
        float,
        number(
            "Total GPUs",
            "GPUs one Spark application may use where the capacity is declared (local masters, Kubernetes, YARN "
            "without yarn_resourcemanager_url); a standalone master and YARN's ResourceManager report their own. "
            "0: a region whose ResourceSpecs ask for GPUs is refused as never fitting.",
            "4",
            minimum=0,
        ),
    ] = 0.0
    gpu_discovery_script: Annotated[
        str | None,
        string(
            "GPU discovery script",
            "spark.executor.resource.gpu.discoveryScript for applications whose ResourceSpecs ask for GPUs (set "
            "only on those: Spark refuses a script without a GPU amount): a script on every executor's node that "
            "prints its GPUs' addresses as JSON, like Spark's examples/src/main/scripts/getGpusResources.sh. "
            "Needed on YARN and Kubernetes; a standalone worker hands its own GPUs to its executors.",
            "/opt/spark/examples/src/main/scripts/getGpusResources.sh",
            check=coercion.absolute_path,
        ),
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
    trigger_min_wait: Annotated[
        float,
        number(
            "Trigger minimum wait (s)",
            "A deferred stage's trigger fires no sooner than this after the deferral, so that Airflow's scheduler "
            "has taken the deferring try's exit before the task resumes (Airflow 3.3 can otherwise fail the resumed "
            "task on that stale event: apache/airflow#72716). 0 fires at once.",
            "10",
            minimum=0,
        ),
    ] = 10.0
    executors_from: Annotated[
        Literal["first_job", "start"],
        choice(
            "Executors from",
            "When a region's application on a cluster asks for its executors: 'first_job' when its first job's "
            "tasks wait (none idle while the driver starts); 'start' all at once when it starts, the first wave "
            "waiting for every one (FLIP-370's even first wave, at the cost of executors idle meanwhile).",
            "first_job",
            choices=EXECUTOR_STARTS,
        ),
    ] = "first_job"
    admission: Annotated[
        Literal["fit_now", "cluster_queue"],
        choice(
            "Admission",
            "How a region on a cluster gets its executors: 'fit_now' (FLIP-138) runs it on what is free now, "
            "smaller when only part of it is, and defers it when not even its minimum fits; 'cluster_queue' asks "
            "the cluster manager for every executor it planned and waits in the cluster manager's own queue for "
            "those not free, never smaller (for a busy shared cluster: docs/simulation.md). Not for local masters.",
            "fit_now",
            choices=ADMISSIONS,
        ),
    ] = "fit_now"

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
    learn_from_history: Annotated[
        bool,
        boolean(
            "Learn from history",
            "Correct each stage's parallelism and memory floor with the expansion learned from its past runs "
            "(shuffle bytes and peak memory per byte on disk, kept under the storage root's _history folder); "
            "false decides from bytes on disk alone and records nothing.",
            "true",
        ),
    ] = True
    history_min_runs: Annotated[
        int,
        integer(
            "History runs needed",
            "Usable past runs (succeeded, shuffled, not run inside another stage's jobs) a stage needs before "
            "its learned expansion corrects a decision.",
            "3",
            minimum=1,
        ),
    ] = DEFAULT_HISTORY_MIN_RUNS

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
            "timeout, locked with a token of its own; an sc://host:port URL names an existing Spark Connect server "
            "(a ;token=... in it is masked like every secret); conn:CONN_ID names one through an Airflow connection "
            "(host, port, the token as password). A region whose executors do not fit the pool's executor shape "
            "runs as its own application (docs/warm.md).",
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


def _problems(model: type[BaseModel], error: ValidationError) -> list[str]:
    """One message per problem pydantic collected: ours as raised, its own (missing, unknown) reworded."""
    problems: list[str] = []
    for item in error.errors(include_url=False):
        cause = item.get("ctx", {}).get("error")
        name = ".".join(str(part) for part in item["loc"])
        if isinstance(cause, ConnectionSettingsError):
            problems.extend(cause.problems)
        elif item["type"] == "missing":
            problems.append(f"{name}: required; allowed: {setting_in(model, name).description}")
        elif item["type"] == "extra_forbidden":
            problems.append(f"{name}: unknown setting; known: {', '.join(model.model_fields)}")
        else:  # not expected: every field validates with our coercers
            problems.append(f"{name or model.__name__}: {item['msg']}")
    return problems


def setting_in(model: type[BaseModel], name: str) -> Setting:
    """The declaration (label, description, kind, coercion...) of the field ``name`` of ``model``."""
    for item in model.model_fields[name].metadata:
        if isinstance(item, Setting):
            return item
    raise LookupError(f"{name}: declared without a Setting")  # a field added without metadata: a code bug
