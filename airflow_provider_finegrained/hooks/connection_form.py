"""Provider-info entries of the ``finegrained_spark`` connection: its form fields and ``[finegrained]`` options.

Declarative, as Airflow 3.2+ expects (``conn-fields`` as JSON schema, ``ui-field-behaviour``), so the
UI builds the form without importing the hook. No Airflow imports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from airflow_provider_finegrained.hooks.settings import DEPLOY_MODES, MASTER_FORMS
from airflow_provider_finegrained.planning.parallelism import NORMALIZE_MODES

CONN_TYPE: Final = "finegrained_spark"
HOOK_CLASS: Final = "airflow_provider_finegrained.hooks.finegrained_spark.FineGrainedSparkHook"
HOOK_NAME: Final = "Fine-grained Spark"
CONFIG_SECTION: Final = "finegrained"
VERSION_ADDED: Final = "0.1.0"

# Must match parse_bytes: a byte count or a size with a binary unit, as Spark writes them.
_BYTES_PATTERN: Final = r"^\s*(\d+(\.\d+)?|\.\d+)\s*([kKmMgGtTpP]?)([iI]?[bB])?\s*$"


@dataclass(frozen=True)
class FormField:
    """One setting as the UI shows it and as ``[finegrained]`` documents it."""

    name: str
    label: str
    description: str
    placeholder: str
    kind: str
    """integer, number, boolean, string, bytes, choice or object."""
    default: str
    """The effective default, in words (the form leaves it empty so ``[finegrained]`` still applies)."""
    choices: tuple[str, ...] = ()
    minimum: float | None = None
    sensitive: bool = False


def _f(name: str, label: str, description: str, placeholder: str, kind: str, default: str, **kw: Any) -> FormField:
    return FormField(name, label, description, placeholder, kind, default, **kw)


FIELDS: Final[tuple[FormField, ...]] = (
    _f(
        "master",
        "Spark master URL",
        f"Where Spark runs; the connection's host field. One of {MASTER_FORMS}.",
        "local[*] or spark://127.0.0.1:7077",
        "string",
        "local[N] with N = this machine's cores",
    ),
    _f(
        "deploy_mode",
        "Deploy mode",
        "Where the Spark driver runs: 'client' (in the Airflow task) or 'cluster' (on the cluster: standalone, "
        "YARN, Kubernetes; the task follows the driver and kills it when the task is killed). Local masters "
        "take 'client' only.",
        "client",
        "choice",
        "client",
        choices=DEPLOY_MODES,
    ),
    _f(
        "storage_root",
        "Storage root",
        "Where stages write their outputs: an absolute local path or an fsspec URL (s3://bucket/prefix, "
        "gs://, hdfs://, abfs://). Every Airflow worker and Spark executor must reach it.",
        "s3://my-bucket/finegrained",
        "string",
        "$AIRFLOW_HOME/finegrained/storage",
    ),
    _f(
        "total_cores",
        "Total cores",
        "Cores one Spark application may use. Local masters imply it (N of local[N], this machine's cores "
        "for local[*], N*C for local-cluster[N,C,M]); required for spark://, YARN and Kubernetes.",
        "16",
        "integer",
        "implied by a local master; required otherwise",
        minimum=1,
    ),
    _f(
        "total_memory",
        "Total memory",
        "Memory one Spark application may use, as bytes or a size like 64g. Default: driver_memory for "
        "local[...]; N*M MiB for local-cluster[N,C,M]; otherwise total_cores / executor_cores executors of "
        "executor_memory plus Spark's overhead (10%, at least 384 MiB).",
        "64g",
        "bytes",
        "derived from the master and executor shape",
    ),
    _f(
        "executor_cores",
        "Executor cores",
        "Cores of one executor for stages without a ResourceSpec (ignored by local[...]).",
        "2",
        "integer",
        "2 (C for local-cluster[N,C,M])",
        minimum=1,
    ),
    _f(
        "executor_memory",
        "Executor memory",
        "Heap of one executor, like 4g (at least 450m, Spark's minimum). Ignored by local[...], where "
        "driver_memory is all the stages get.",
        "4g",
        "bytes",
        "2g (M MiB for local-cluster[N,C,M])",
    ),
    _f(
        "driver_memory",
        "Driver memory",
        "spark.driver.memory, like 2g (at least 450m). In local mode this is the memory the stages get.",
        "2g",
        "bytes",
        "2g",
    ),
    _f(
        "min_parallelism",
        "Minimum parallelism",
        "Lower bound of a stage's adaptive parallelism.",
        "1",
        "integer",
        "1",
        minimum=1,
    ),
    _f(
        "max_parallelism",
        "Maximum parallelism",
        "Upper bound of a stage's adaptive parallelism.",
        "128",
        "integer",
        "128",
        minimum=1,
    ),
    _f(
        "avg_bytes_per_task",
        "Bytes per task",
        "Upstream bytes one task should read; a stage's parallelism is its input bytes divided by this.",
        "64m",
        "bytes",
        "64m",
    ),
    _f(
        "max_broadcast_ratio",
        "Max broadcast ratio",
        "Largest share of a task's bytes that broadcast inputs may count for, in [0, 1).",
        "0.5",
        "number",
        "0.5",
        minimum=0,
    ),
    _f(
        "normalize",
        "Normalize parallelism",
        "'none' keeps the computed parallelism; 'power_of_two' rounds it to the nearest power of two.",
        "none",
        "choice",
        "none",
        choices=NORMALIZE_MODES,
    ),
    _f(
        "default_source_parallelism",
        "Default source parallelism",
        "Parallelism of a source stage whose input size is unknown.",
        "8",
        "integer",
        "max_parallelism",
        minimum=1,
    ),
    _f(
        "adaptive_query_execution",
        "Adaptive query execution",
        "Keep Spark AQE on inside each stage as a second, in-query correction of the planned parallelism.",
        "true",
        "boolean",
        "true",
    ),
    _f(
        "spark_conf",
        "Extra Spark conf",
        "JSON object of Spark properties added to every submission. Values of keys containing password, "
        "secret, token, credential or access key, or ending in .key, are masked in logs, XCom and the UI. Properties "
        "the planner decides (executor size, shuffle partitions, memory fraction) are refused.",
        '{"spark.eventLog.enabled": "true"}',
        "object",
        "{}",
        sensitive=True,
    ),
    _f(
        "spark_home",
        "SPARK_HOME",
        "A Spark installation whose bin/spark-submit runs the stages.",
        "/opt/spark",
        "string",
        "the pip-installed pyspark",
    ),
    _f(
        "java_home",
        "JAVA_HOME",
        "Java 17+ for spark-submit.",
        "/usr/lib/jvm/java-17-openjdk-amd64",
        "string",
        "the worker's JAVA_HOME, else java on PATH",
    ),
    _f(
        "master_webui_url",
        "Master web UI URL",
        "Spark standalone only: the master's web UI, whose /json/ the connection test and capacity checks read.",
        "http://127.0.0.1:8080",
        "string",
        "port 8080 of the master's host",
    ),
    _f(
        "min_slots",
        "Minimum slots",
        "Minimum resources: task slots (cores) kept for the pipeline; checked against max_slots in whole executors.",
        "4",
        "integer",
        "none",
        minimum=0,
    ),
    _f(
        "max_slots",
        "Maximum slots",
        "Maximum resources: task slots (cores) the pipeline may hold.",
        "32",
        "integer",
        "none",
        minimum=0,
    ),
    _f(
        "min_memory",
        "Minimum memory",
        "Minimum resources: executor memory kept for the pipeline, like 8g.",
        "8g",
        "bytes",
        "none",
    ),
    _f(
        "max_memory",
        "Maximum memory",
        "Maximum resources: executor memory the pipeline may hold, like 64g.",
        "64g",
        "bytes",
        "none",
    ),
    _f(
        "min_cpu",
        "Minimum CPU",
        "Minimum resources: CPU cores kept for the pipeline (may be fractional).",
        "4",
        "number",
        "none",
        minimum=0,
    ),
    _f(
        "max_cpu",
        "Maximum CPU",
        "Maximum resources: CPU cores the pipeline may hold.",
        "32",
        "number",
        "none",
        minimum=0,
    ),
    _f(
        "yarn_resourcemanager_url",
        "YARN ResourceManager URL",
        "YARN only: the ResourceManager's web address, whose REST API (/ws/v1/cluster/nodes, /metrics) tells the "
        "free capacity before a region is submitted. Unset: the declared total_cores/total_memory are used.",
        "http://resourcemanager:8088",
        "string",
        "none (declared capacity)",
    ),
    _f(
        "capacity_wait_timeout",
        "Capacity wait timeout (s)",
        "When not even a region's minimum fits the free capacity, its task waits (deferred, holding no worker "
        "slot) this many seconds for capacity to free, then fails naming what it asked and what was free. "
        "0 fails at once.",
        "3600",
        "number",
        "3600",
        minimum=0,
    ),
    _f(
        "capacity_poll_interval",
        "Capacity poll interval (s)",
        "How often a waiting region asks the cluster for its free capacity.",
        "15",
        "number",
        "15",
        minimum=0.1,
    ),
    _f(
        "history_server_url",
        "Spark history server URL",
        "Where the stage tasks' 'Spark UI' link points once an application has ended (its driver UI is gone "
        "then). Unset: the link goes to the live application's UI only.",
        "http://spark-history:18080",
        "string",
        "none",
    ),
    _f(
        "warm_pool",
        "Warm pool",
        "How regions reach Spark: 'off' starts one application per region with spark-submit; 'auto' runs them "
        "in a long-lived Spark Connect server the provider starts on first use and stops after the idle "
        "timeout; an sc://host:port URL names an existing Spark Connect server. A region whose executors do "
        "not fit the pool's executor shape runs as its own application (docs/warm.md).",
        "auto",
        "string",
        "off (the embedded default, with no connection defined: auto)",
    ),
    _f(
        "warm_idle_timeout",
        "Warm pool idle timeout (s)",
        "A pool the provider started stops after this many seconds with no region running; 0 keeps it until "
        "stopped with 'finegrained warm stop'.",
        "600",
        "number",
        "600",
        minimum=0,
    ),
)

_BY_NAME: Final = {f.name: f for f in FIELDS}


def _schema(spec: FormField) -> dict[str, Any]:
    # No "default" in the schema: the form would store it into the extra and override [finegrained].
    json_type = {"bytes": "string", "choice": "string"}.get(spec.kind, spec.kind)
    schema: dict[str, Any] = {"type": [json_type, "null"]}
    if spec.choices:
        schema["enum"] = list(spec.choices)
    if spec.minimum is not None:
        schema["minimum"] = spec.minimum
    if spec.kind == "number" and spec.name == "max_broadcast_ratio":
        schema["exclusiveMaximum"] = 1
    if spec.kind == "bytes":
        schema["pattern"] = _BYTES_PATTERN
    if json_type == "string" and not spec.choices:
        # The React form shows `examples` as suggestions; it has no placeholder for extra fields.
        schema["examples"] = [spec.placeholder]
    return schema


def connection_types() -> list[dict[str, Any]]:
    """The provider info's ``connection-types`` entry for ``finegrained_spark``."""
    extras = [f for f in FIELDS if f.name != "master"]  # the master URL is the host field
    master = _BY_NAME["master"]
    return [
        {
            "connection-type": CONN_TYPE,
            "hook-class-name": HOOK_CLASS,
            "hook-name": HOOK_NAME,
            "conn-fields": {
                f.name: {
                    "label": f.label,
                    "description": f"{f.description} Default: {f.default}.",
                    "schema": _schema(f),
                }
                for f in extras
            },
            "ui-field-behaviour": {
                "hidden-fields": ["login", "port", "schema", "extra"],
                "relabeling": {"host": master.label, "password": "Spark authentication secret"},
                "placeholders": {
                    "host": master.placeholder,
                    "password": "spark.authenticate.secret (standalone); leave empty if unused",
                    **{f.name: f.placeholder for f in extras},
                },
            },
        }
    ]


def config_section() -> dict[str, Any]:
    """The provider info's ``config`` entry: the ``[finegrained]`` section of installation-wide defaults."""
    config_types = {"integer": "integer", "number": "float", "boolean": "boolean"}
    return {
        CONFIG_SECTION: {
            "description": (
                "Installation-wide defaults of finegrained_spark connections (and of the embedded default "
                "when no connection is defined). A connection's own values override them; operator "
                "arguments override both. Options default to unset: the Default named in each description applies."
            ),
            "options": {
                f.name: {
                    "description": f"{f.description} Default: {f.default}.",
                    "version_added": VERSION_ADDED,
                    "type": config_types.get(f.kind, "string"),
                    "example": f.placeholder,
                    "default": None,
                    **({"sensitive": True} if f.sensitive else {}),
                }
                for f in FIELDS
            },
        }
    }
