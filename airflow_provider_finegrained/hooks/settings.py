"""The settings of a ``finegrained_spark`` connection: coerced from strings, validated, redactable.

Pure (no Airflow imports): the hook feeds it a connection's fields and the ``[finegrained]`` config
section; the planner, the CLI and tests can build settings from plain mappings.
"""

from __future__ import annotations

import difflib
import json
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from types import MappingProxyType
from typing import Any, Final, Literal, NamedTuple, NoReturn, cast
from urllib.parse import urlsplit, urlunsplit

from airflow_provider_finegrained.planning import (
    DEFAULT_AVG_BYTES_PER_TASK,
    ClusterProfile,
    ParallelismConfig,
    ResourceBounds,
    WorkerShape,
    check_resource_stability,
    format_bytes,
    parse_bytes,
)
from airflow_provider_finegrained.planning.parallelism import NORMALIZE_MODES

MiB: Final = 2**20
GiB: Final = 2**30
SPARK_MIN_MEMORY: Final = 450 * MiB
"""Spark refuses a JVM with less: 1.5 times its 300 MiB reserved memory."""
MEMORY_OVERHEAD_FACTOR: Final = 0.10
MIN_MEMORY_OVERHEAD: Final = 384 * MiB
"""Spark's defaults for ``spark.executor.memoryOverhead`` (also :class:`ClusterProfile`'s)."""

DEPLOY_MODES: Final = ("client", "cluster")
WARM_POOL_MODES: Final = ("off", "auto")
EMBEDDED_WARM_POOL: Final = "auto"
EXTRA_PREFIX: Final = "extra__finegrained_spark__"
"""Prefix of extras written by Airflow's older connection forms; accepted and stripped."""
MASTER_FORMS: Final = (
    "local, local[N], local[*], local[N,F], local-cluster[N,C,M], spark://host:port[,host:port], "
    "yarn, k8s://https://host:port"
)
# Spark's own spark.redaction.regex ((?i)secret|password|token|access[.]?key) plus credentials, `....key`
# and Hadoop's `fs.azure.account.key.<account>`; the same rule as spark-submit's log redaction here.
SECRET_KEY_PATTERN: Final = re.compile(r"password|secret|token|credential|access[._-]?key|\.key(?:$|\.)", re.IGNORECASE)
REDACTED: Final = "***"

# Spark properties the planner decides per region or stage, or that other fields own: a value in
# spark_conf would either be overridden silently or fight the planner, so it is refused.
RESERVED_CONF: Final[Mapping[str, str]] = MappingProxyType(
    {
        "spark.master": "set the connection's host (master URL) instead",
        "spark.submit.deployMode": "set deploy_mode instead",
        "spark.driver.memory": "set driver_memory instead",
        "spark.executor.memory": "set executor_memory instead (the planner sizes executors)",
        "spark.executor.cores": "set executor_cores instead (the planner sizes executors)",
        "spark.executor.instances": "the planner decides it; cap it with total_cores",
        "spark.cores.max": "the planner decides it; cap it with total_cores",
        "spark.executor.memoryOverhead": "the planner decides it from executor_memory",
        "spark.task.cpus": "declare cpu cores in a stage's ResourceSpec instead",
        "spark.memory.fraction": "the planner decides it; declare managed memory in a ResourceSpec",
        "spark.sql.shuffle.partitions": "the planner decides it per stage; see min/max_parallelism",
        "spark.sql.files.maxPartitionBytes": "the planner decides it per stage from the input size",
        "spark.sql.adaptive.enabled": "set adaptive_query_execution instead",
    }
)

MasterKind = Literal["local", "local-cluster", "standalone", "yarn", "k8s"]


class ConnectionSettingsError(ValueError):
    """Invalid connection settings; ``problems`` holds one message per bad field."""

    def __init__(self, problems: str | Sequence[str]) -> None:
        self.problems: tuple[str, ...] = (problems,) if isinstance(problems, str) else tuple(problems)
        super().__init__("; ".join(self.problems))


class MasterInfo(NamedTuple):
    """A parsed master URL: its kind and what it says about the cluster's size."""

    kind: MasterKind
    threads: int | None = None
    """Local threads (N of local[N]); None for local[*]."""
    workers: int = 0
    worker_cores: int = 0
    worker_memory_mib: int = 0
    hosts: tuple[tuple[str, int], ...] = ()
    """Standalone masters as (host, port)."""


# The same patterns as Spark's SparkMasterRegex, so nothing is accepted here that Spark refuses.
_LOCAL = re.compile(r"local(?:\[(?P<threads>[0-9]+|\*)(?:\s*,\s*(?P<failures>[0-9]+))?\])?")
_LOCAL_CLUSTER = re.compile(r"local-cluster\[\s*(?P<n>[0-9]+)\s*,\s*(?P<c>[0-9]+)\s*,\s*(?P<m>[0-9]+)\s*\]")
_HOST_PORT = re.compile(r"(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):(?P<port>\d{1,5})")
_K8S = re.compile(r"k8s://(?:https?://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+)(?::\d{1,5})?(?:/\S*)?")
_URL_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
_INTEGER = re.compile(r"\s*[+-]?\d+\s*")
_TRUE = frozenset({"true", "t", "yes", "y", "on", "1"})
_FALSE = frozenset({"false", "f", "no", "n", "off", "0"})


def available_cpus() -> int:
    """Cores this process may use: what ``local[*]`` gets (the JVM also honours the affinity mask)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # not on Linux
        return os.cpu_count() or 1


def parse_master(master: str) -> MasterInfo:
    """Parse a Spark master URL of an accepted form; :class:`ConnectionSettingsError` otherwise."""
    value = master.strip()

    def bad(reason: str = "") -> ConnectionSettingsError:
        return ConnectionSettingsError(f"master: {master!r} is not a Spark master URL{reason}; allowed: {MASTER_FORMS}")

    if match := _LOCAL.fullmatch(value):
        threads = match.group("threads")
        if threads is None:
            return MasterInfo("local", threads=1)
        if threads == "*":
            return MasterInfo("local", threads=None)
        if int(threads) < 1 or (match.group("failures") is not None and int(match.group("failures")) < 1):
            raise bad(" (threads and max failures must be >= 1)")
        return MasterInfo("local", threads=int(threads))
    if match := _LOCAL_CLUSTER.fullmatch(value):
        n, c, m = (int(match.group(g)) for g in ("n", "c", "m"))
        if min(n, c, m) < 1:
            raise bad(" (N, C and M must be >= 1)")
        return MasterInfo("local-cluster", workers=n, worker_cores=c, worker_memory_mib=m)
    if value.startswith("spark://"):
        hosts = []
        for part in value[len("spark://") :].split(","):
            match = _HOST_PORT.fullmatch(part.strip())
            if match is None or not 1 <= int(match.group("port")) <= 65535:
                raise bad(" (each master needs host:port)")
            hosts.append((match.group("host"), int(match.group("port"))))
        return MasterInfo("standalone", hosts=tuple(hosts))
    if value == "yarn":
        return MasterInfo("yarn")
    if _K8S.fullmatch(value):
        return MasterInfo("k8s")
    raise bad()


def is_secret_conf_key(key: str) -> bool:
    """Whether a Spark property holds a secret (its value is masked in logs, XCom and the UI)."""
    return SECRET_KEY_PATTERN.search(key) is not None


def redact_url(url: str) -> str:
    """Replace the password of a URL's user info (``s3://key:secret@bucket``) with ``***``."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    if not password:
        return url
    netloc = parts.netloc.replace(f":{password}@", f":{REDACTED}@", 1)
    return urlunsplit(parts._replace(netloc=netloc))


def url_password(url: str) -> str | None:
    try:
        return urlsplit(url).password
    except ValueError:
        return None


class _FrozenConf(Mapping[str, str]):
    """Read-only, hashable, picklable Spark properties (MappingProxyType cannot be copied); repr hides secrets."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping[str, str]) -> None:
        self._data = dict(data)

    def __getitem__(self, key: str) -> str:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __hash__(self) -> int:
        return hash(frozenset(self._data.items()))

    def __repr__(self) -> str:
        # Log maskers redact strings, dicts and lists but format other objects untouched: hide secrets here.
        return repr({k: REDACTED if is_secret_conf_key(k) else v for k, v in self._data.items()})

    def __reduce__(self) -> tuple[type[_FrozenConf], tuple[dict[str, str]]]:
        return (_FrozenConf, (self._data,))


# Coercers: (name shown in messages, raw value) -> typed value. Each accepts the typed value as well,
# so ConnectionSettings.__post_init__ can run them again on directly constructed settings.


def _integer(where: str, raw: object, *, minimum: int) -> int:
    value: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif (isinstance(raw, float) and raw.is_integer()) or (isinstance(raw, str) and _INTEGER.fullmatch(raw)):
        value = int(raw)
    if value is None:
        raise ConnectionSettingsError(f"{where}: {raw!r} is not an integer; allowed: an integer >= {minimum}")
    if value < minimum:
        raise ConnectionSettingsError(f"{where}: {raw!r} is out of range; allowed: an integer >= {minimum}")
    return value


def _number(where: str, raw: object, *, minimum: float, below: float | None = None) -> float:
    allowed = f"a number >= {minimum:g}" if below is None else f"a number in [{minimum:g}, {below:g})"
    value: float | None = None
    if isinstance(raw, int | float) and not isinstance(raw, bool):
        value = float(raw)
    elif isinstance(raw, str):
        try:
            value = float(raw)
        except ValueError:
            value = None
    if value is None or not math.isfinite(value):
        raise ConnectionSettingsError(f"{where}: {raw!r} is not a number; allowed: {allowed}")
    if value < minimum or (below is not None and value >= below):
        raise ConnectionSettingsError(f"{where}: {raw!r} is out of range; allowed: {allowed}")
    return value


def _boolean(where: str, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
        return raw.strip().lower() in _TRUE
    raise ConnectionSettingsError(f"{where}: {raw!r} is not a boolean; allowed: true, false")


def _byte_size(where: str, raw: object, *, minimum: int = 0, why: str = "") -> int:
    try:
        value = parse_bytes(cast("int | float | str", raw), what=where)
    except ValueError:
        raise ConnectionSettingsError(
            f"{where}: {raw!r} is not a byte size; allowed: a byte count or a size like '512m', '2g', '1.5GiB'"
        ) from None
    if value < minimum:
        reason = f" ({why})" if why else ""
        raise ConnectionSettingsError(
            f"{where}: {raw!r} is too small; allowed: at least {format_bytes(minimum)}{reason}"
        )
    return value


def _choice(where: str, raw: object, choices: Sequence[str]) -> str:
    if isinstance(raw, str) and raw.strip().lower() in choices:
        return raw.strip().lower()
    _fail(f"{where}: {raw!r} is not one of {', '.join(repr(c) for c in choices)}")


def _fail(message: str) -> NoReturn:
    raise ConnectionSettingsError(message)


def _text(where: str, raw: object) -> str:
    if not isinstance(raw, str) or not raw.strip():
        _fail(f"{where}: {raw!r} is not a non-empty string")
    return raw.strip()


def _absolute_path(where: str, raw: object) -> str:
    path = os.path.expanduser(_text(where, raw))
    if not os.path.isabs(path):
        _fail(f"{where}: {raw!r} is not an absolute path; allowed: an absolute path such as /opt/spark")
    return os.path.normpath(path)


def _storage_root(where: str, raw: object) -> str:
    value = _text(where, raw)
    if _URL_SCHEME.match(value):
        scheme, rest = value.split("://", 1)
        if not rest.strip("/") or (scheme.lower() == "file" and not rest.startswith("/")):
            _fail(f"{where}: {raw!r} has no location after '{scheme}://'; allowed: a URL like s3://bucket/prefix")
        return f"{scheme.lower()}://{rest.rstrip('/') or '/'}"
    path = os.path.expanduser(value)
    if not os.path.isabs(path):
        _fail(
            f"{where}: {raw!r} is neither an absolute path nor a URL; allowed: an absolute local path "
            "(/data/finegrained) or an fsspec URL (s3://bucket/prefix, gs://..., hdfs://..., abfs://..., file:///path)"
        )
    return os.path.normpath(path)


def _warm_pool(where: str, raw: object) -> str:
    value = _text(where, raw)
    if value in WARM_POOL_MODES:
        return value
    parts = urlsplit(value)
    if parts.scheme == "sc" and parts.hostname:
        return value
    _fail(
        f"{where}: {raw!r} is not a warm-pool setting; allowed: {', '.join(repr(m) for m in WARM_POOL_MODES)} "
        "or a Spark Connect URL like sc://spark-connect:15002"
    )


def _http_url(where: str, raw: object) -> str:
    value = _text(where, raw)
    try:
        parts = urlsplit(value)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        valid = False
    if not valid:
        _fail(f"{where}: {raw!r} is not an http(s) URL; allowed: a URL like http://spark-master:8080")
    return value.rstrip("/")


def _master(where: str, raw: object) -> str:
    value = _text(where, raw)
    try:
        parse_master(value)
    except ConnectionSettingsError as exc:
        raise ConnectionSettingsError(str(exc).replace("master: ", f"{where}: ", 1)) from None
    return value


def _spark_conf(where: str, raw: object) -> _FrozenConf:
    data: object = raw
    if isinstance(raw, str):
        try:
            data = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            data = None
    if not isinstance(data, Mapping):
        _fail(
            f"{where}: {raw!r} is not a JSON object; allowed: Spark properties such as "
            '{"spark.eventLog.enabled": "true"}'
        )
    problems = []
    conf: dict[str, str] = {}
    for key, value in data.items():
        name = key.strip() if isinstance(key, str) else key
        if not isinstance(name, str) or not name.startswith("spark."):
            problems.append(
                f"{where}: key {key!r} does not start with 'spark.' (spark-submit ignores it); "
                "allowed: Spark properties, with Hadoop settings as spark.hadoop.*"
            )
        elif name in RESERVED_CONF:
            problems.append(f"{where}: {name!r} is not allowed here: {RESERVED_CONF[name]}")
        elif isinstance(value, bool):
            conf[name] = "true" if value else "false"  # Spark parses lower-case booleans only
        elif isinstance(value, str | int | float):
            conf[name] = str(value)
        else:
            problems.append(f"{where}: the value of {name!r} is {value!r}; allowed: a string, number or boolean")
    if problems:
        raise ConnectionSettingsError(problems)
    return _FrozenConf(conf)


def _optional(coerce: Callable[[str, object], object]) -> Callable[[str, object], object]:
    return lambda where, raw: None if raw is None else coerce(where, raw)


def _at_least_one(where: str, raw: object) -> int:
    return _integer(where, raw, minimum=1)


def _non_negative(where: str, raw: object) -> int:
    return _integer(where, raw, minimum=0)


def _spark_memory(where: str, raw: object) -> int:
    return _byte_size(where, raw, minimum=SPARK_MIN_MEMORY, why="Spark's minimum for a JVM")


_COERCE: Final[Mapping[str, Callable[[str, object], object]]] = MappingProxyType(
    {
        "master": _master,
        "deploy_mode": lambda w, r: _choice(w, r, DEPLOY_MODES),
        "storage_root": _storage_root,
        "total_cores": _at_least_one,
        "total_memory": lambda w, r: _byte_size(w, r, minimum=1),
        "executor_cores": _at_least_one,
        "executor_memory": _spark_memory,
        "driver_memory": _spark_memory,
        "min_parallelism": _at_least_one,
        "max_parallelism": _at_least_one,
        "avg_bytes_per_task": lambda w, r: _byte_size(w, r, minimum=1),
        "max_broadcast_ratio": lambda w, r: _number(w, r, minimum=0, below=1),
        "normalize": lambda w, r: _choice(w, r, NORMALIZE_MODES),
        "default_source_parallelism": _optional(_at_least_one),
        "adaptive_query_execution": _boolean,
        "spark_conf": _spark_conf,
        "spark_home": _optional(_absolute_path),
        "java_home": _optional(_absolute_path),
        "master_webui_url": _optional(_http_url),
        "min_slots": _optional(_non_negative),
        "max_slots": _optional(_non_negative),
        "min_memory": _optional(lambda w, r: _byte_size(w, r)),
        "max_memory": _optional(lambda w, r: _byte_size(w, r)),
        "min_cpu": _optional(lambda w, r: _number(w, r, minimum=0)),
        "max_cpu": _optional(lambda w, r: _number(w, r, minimum=0)),
        "yarn_resourcemanager_url": _optional(_http_url),
        "capacity_wait_timeout": lambda w, r: _number(w, r, minimum=0),
        "capacity_poll_interval": lambda w, r: _number(w, r, minimum=0.1),
        "history_server_url": _optional(_http_url),
        "warm_pool": _warm_pool,
        "warm_idle_timeout": lambda w, r: _number(w, r, minimum=0),
    }
)
_RESOURCE_BOUNDS: Final = ("min_slots", "max_slots", "min_cpu", "max_cpu", "min_memory", "max_memory")
_URL_FIELDS: Final = ("master", "storage_root", "master_webui_url", "yarn_resourcemanager_url", "history_server_url")
_NO_DEFAULTS: Final[Mapping[str, Any]] = MappingProxyType({})


@dataclass(frozen=True, kw_only=True, repr=False)
class ConnectionSettings:
    """Everything a ``finegrained_spark`` connection says: where Spark runs, its size, the planner's knobs.

    Memory fields are bytes. Construct it with :meth:`from_connection_fields` (coerces strings and
    derives defaults) or directly with typed values; both validate.
    """

    master: str
    deploy_mode: str = "client"
    storage_root: str
    total_cores: int
    total_memory: int
    executor_cores: int = 2
    executor_memory: int = 2 * GiB
    driver_memory: int = 2 * GiB
    min_parallelism: int = 1
    max_parallelism: int = 128
    avg_bytes_per_task: int = DEFAULT_AVG_BYTES_PER_TASK
    max_broadcast_ratio: float = 0.5
    normalize: str = "none"
    default_source_parallelism: int | None = None
    adaptive_query_execution: bool = True
    spark_conf: Mapping[str, str] = field(default_factory=lambda: _FrozenConf({}))
    spark_home: str | None = None
    java_home: str | None = None
    master_webui_url: str | None = None
    min_slots: int | None = None
    max_slots: int | None = None
    min_memory: int | None = None
    max_memory: int | None = None
    min_cpu: float | None = None
    max_cpu: float | None = None
    yarn_resourcemanager_url: str | None = None
    capacity_wait_timeout: float = 3600.0
    """Seconds a region waits (deferred) for free capacity before it fails; 0 fails at once."""
    capacity_poll_interval: float = 15.0
    history_server_url: str | None = None
    """A Spark history server's web address: the extra link's target once an application has ended."""
    warm_pool: str = "off"
    """``off`` (a spark-submit per region), ``auto`` (a Spark Connect pool the provider starts on demand)
    or ``sc://host:port`` (an existing Spark Connect server)."""
    warm_idle_timeout: float = 600.0
    """Seconds a pool the provider started stays up with nothing to run; 0 keeps it until stopped."""
    secret_conf_keys: frozenset[str] = field(init=False, default=frozenset())
    """Keys of ``spark_conf`` whose values are secrets (derived)."""

    def __post_init__(self) -> None:
        problems: list[str] = []
        for name, coerce in _COERCE.items():
            try:
                object.__setattr__(self, name, coerce(name, getattr(self, name)))
            except ConnectionSettingsError as exc:
                problems.extend(exc.problems)
        if problems:
            raise ConnectionSettingsError(problems)
        problems = self._cross_field_problems()
        if problems:
            raise ConnectionSettingsError(problems)
        object.__setattr__(self, "secret_conf_keys", frozenset(k for k in self.spark_conf if is_secret_conf_key(k)))

    # -- derived views -------------------------------------------------------------------------

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
    def storage_is_local(self) -> bool:
        """Whether ``storage_root`` is a path on this machine's disk (or a ``file://`` URL)."""
        return not _URL_SCHEME.match(self.storage_root) or self.storage_root.startswith("file://")

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

    def webui_json_urls(self) -> list[str]:
        """Standalone masters' ``/json/`` status URLs: ``master_webui_url``, else port 8080 of each master."""
        if self.master_kind != "standalone":
            return []
        if self.master_webui_url:
            base = self.master_webui_url
            return [base if base.endswith("/json") else f"{base}/json/"]
        return [f"http://{host}:8080/json/" for host, _ in self.master_info.hosts]

    def secret_values(self) -> list[str]:
        """Values to register with a log masker: secret Spark properties and URL passwords."""
        values = [self.spark_conf[k] for k in sorted(self.secret_conf_keys) if self.spark_conf[k]]
        for name in _URL_FIELDS:
            url = getattr(self, name)
            if isinstance(url, str) and (password := url_password(url)):
                values.append(password)
        return values

    def redacted(self) -> dict[str, Any]:
        """A JSON-safe dict of all settings with secrets replaced by ``***`` (for logs, XCom, the UI)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "spark_conf":
                value = {k: REDACTED if k in self.secret_conf_keys else v for k, v in sorted(value.items())}
            elif f.name == "secret_conf_keys":
                value = sorted(value)
            elif f.name in _URL_FIELDS and isinstance(value, str):
                value = redact_url(value)
            out[f.name] = value
        return out

    def __repr__(self) -> str:
        # The dataclass repr would print secret spark_conf values into any log line that shows settings.
        shown = ", ".join(f"{k}={v!r}" for k, v in self.redacted().items() if k != "secret_conf_keys")
        return f"ConnectionSettings({shown})"

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
        for name, coerce in _COERCE.items():
            if name == "master":
                continue
            sources = [(given, name), (installed, f"[finegrained] {name}")]
            if name == "spark_conf":
                merged: dict[str, str] = {}
                for source, where in reversed(sources):  # the connection's keys win over the installation's
                    if name in source:
                        merged.update(_coerce_into(coerce, where, source[name], problems) or {})
                values[name] = merged
                continue
            for source, where in sources:
                if name in source:
                    values[name] = _coerce_into(coerce, where, source[name], problems)
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
            master, info = f"local[{cpus}]", MasterInfo("local", threads=cpus)
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


def settable_fields() -> tuple[str, ...]:
    """Names a connection (or the ``[finegrained]`` section) may set, in declaration order."""
    return tuple(f.name for f in fields(ConnectionSettings) if f.init)


def field_default(name: str) -> Any:
    """The dataclass default of a field (``None`` for derived or required ones)."""
    for f in fields(ConnectionSettings):
        if f.name == name:
            if f.default is not MISSING:
                return f.default
            if f.default_factory is not MISSING:
                return f.default_factory()
    return None


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


def _coerce_into(coerce: Callable[[str, object], object], where: str, raw: object, problems: list[str]) -> Any:
    try:
        return coerce(where, raw)
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
