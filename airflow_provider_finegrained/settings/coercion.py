"""Coercion of one setting's raw value (a typed value, or a string as the CLI, env and extras hold it).

Each coercer takes ``(where, raw)``: ``where`` names the setting in messages (``max_parallelism``,
``[finegrained] max_parallelism``). It returns the typed value or raises :class:`ConnectionSettingsError`
naming the setting, the value and what is allowed. Each accepts its own typed output too, so a model
built from typed values goes through the same rules. Pure: no Airflow imports.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Final, NoReturn, cast
from urllib.parse import urlsplit

from airflow_provider_finegrained.planning import format_bytes, parse_bytes
from airflow_provider_finegrained.secrets import REDACTED, SECRET_KEY_PATTERN, is_secret_key, redact_mapping, redact_url

Coercer = Callable[[str, object], object]
"""``(where, raw) -> typed value``; raises :class:`ConnectionSettingsError`."""

WARM_POOL_MODES: Final = ("off", "auto")
WARM_POOL_CONN_PREFIX: Final = "conn:"
URL_SCHEME: Final = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://")
# Airflow's own rule for connection ids (airflow.models.connection.RE_SANITIZE_CONN_ID, at most 250 chars).
CONN_ID: Final = re.compile(r"^[\w#!()\-.:/\\]{1,250}$")
_INTEGER: Final = re.compile(r"\s*[+-]?\d+\s*")
_TRUE: Final = frozenset({"true", "t", "yes", "y", "on", "1"})
_FALSE: Final = frozenset({"false", "f", "no", "n", "off", "0"})

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


class ConnectionSettingsError(ValueError):
    """Invalid connection settings; ``problems`` holds one message per bad field."""

    def __init__(self, problems: str | Sequence[str]) -> None:
        self.problems: tuple[str, ...] = (problems,) if isinstance(problems, str) else tuple(problems)
        super().__init__("; ".join(self.problems))


def fail(message: str) -> NoReturn:
    raise ConnectionSettingsError(message)


def shown(raw: object) -> str:
    """``repr(raw)`` for a message, with a URL's secrets masked (an error must not leak a token)."""
    return repr(redact_url(raw)) if isinstance(raw, str) else repr(raw)


class FrozenConf(Mapping[str, str]):
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
        return repr(redact_mapping(self._data))

    def __reduce__(self) -> tuple[type[FrozenConf], tuple[dict[str, str]]]:
        return (FrozenConf, (self._data,))


def integer(where: str, raw: object, *, minimum: int) -> int:
    value: int | None = None
    if isinstance(raw, int) and not isinstance(raw, bool):
        value = raw
    elif (isinstance(raw, float) and raw.is_integer()) or (isinstance(raw, str) and _INTEGER.fullmatch(raw)):
        value = int(raw)
    if value is None:
        fail(f"{where}: {raw!r} is not an integer; allowed: an integer >= {minimum}")
    if value < minimum:
        fail(f"{where}: {raw!r} is out of range; allowed: an integer >= {minimum}")
    return value


def number(where: str, raw: object, *, minimum: float, below: float | None = None) -> float:
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
        fail(f"{where}: {raw!r} is not a number; allowed: {allowed}")
    if value < minimum or (below is not None and value >= below):
        fail(f"{where}: {raw!r} is out of range; allowed: {allowed}")
    return value


def boolean(where: str, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, int) and raw in (0, 1):
        return bool(raw)
    if isinstance(raw, str) and raw.strip().lower() in _TRUE | _FALSE:
        return raw.strip().lower() in _TRUE
    fail(f"{where}: {raw!r} is not a boolean; allowed: true, false")


def byte_size(where: str, raw: object, *, minimum: int = 0, why: str = "") -> int:
    try:
        value = parse_bytes(cast("int | float | str", raw), what=where)
    except ValueError:
        fail(f"{where}: {raw!r} is not a byte size; allowed: a byte count or a size like '512m', '2g', '1.5GiB'")
    if value < minimum:
        reason = f" ({why})" if why else ""
        fail(f"{where}: {raw!r} is too small; allowed: at least {format_bytes(minimum)}{reason}")
    return value


def choice(where: str, raw: object, choices: Sequence[str]) -> str:
    if isinstance(raw, str) and raw.strip().lower() in choices:
        return raw.strip().lower()
    fail(f"{where}: {raw!r} is not one of {', '.join(repr(c) for c in choices)}")


def text(where: str, raw: object) -> str:
    if not isinstance(raw, str) or not raw.strip():
        fail(f"{where}: {shown(raw)} is not a non-empty string")
    return raw.strip()


def absolute_path(where: str, raw: object) -> str:
    path = os.path.expanduser(text(where, raw))
    if not os.path.isabs(path):
        fail(f"{where}: {raw!r} is not an absolute path; allowed: an absolute path such as /opt/spark")
    return os.path.normpath(path)


def auto_off_or_path(where: str, raw: object) -> str:
    """``auto``, ``off`` (any case) or an absolute path."""
    value = text(where, raw)
    if value.lower() in ("auto", "off"):
        return value.lower()
    path = os.path.expanduser(value)
    if not os.path.isabs(path):
        fail(f"{where}: {shown(raw)} is not auto, off or an absolute path; allowed: auto, off, /path/to/spark.jsa")
    return os.path.normpath(path)


def storage_root(where: str, raw: object) -> str:
    value = text(where, raw)
    if URL_SCHEME.match(value):
        scheme, rest = value.split("://", 1)
        if not rest.strip("/") or (scheme.lower() == "file" and not rest.startswith("/")):
            fail(f"{where}: {shown(raw)} has no location after '{scheme}://'; allowed: a URL like s3://bucket/prefix")
        return f"{scheme.lower()}://{rest.rstrip('/') or '/'}"
    path = os.path.expanduser(value)
    if not os.path.isabs(path):
        fail(
            f"{where}: {shown(raw)} is neither an absolute path nor a URL; allowed: an absolute local path "
            "(/data/finegrained) or an fsspec URL (s3://bucket/prefix, gs://..., hdfs://..., abfs://..., file:///path)"
        )
    return os.path.normpath(path)


def conn_id(where: str, raw: object) -> str:
    value = text(where, raw)
    if not CONN_ID.fullmatch(value):
        fail(
            f"{where}: {raw!r} is not an Airflow connection id; allowed: up to 250 letters, digits and "
            "_ - . : / \\ # ! ( ) such as aws_default"
        )
    return value


def warm_pool(where: str, raw: object) -> str:
    value = text(where, raw)
    if value in WARM_POOL_MODES:
        return value
    if value.startswith(WARM_POOL_CONN_PREFIX):
        # An external Spark Connect server named by an Airflow connection (its token in the password).
        if not CONN_ID.fullmatch(value.removeprefix(WARM_POOL_CONN_PREFIX)):
            fail(
                f"{where}: {shown(raw)} does not name an Airflow connection; "
                "allowed: conn:<conn_id> such as conn:spark_connect"
            )
        return value
    try:
        parts = urlsplit(value)
        # Spark Connect reads ;parameters only after a "/" (sc://host:port/;token=...).
        valid = parts.scheme == "sc" and bool(parts.hostname) and ";" not in parts.netloc
    except ValueError:
        valid = False
    if not valid:
        fail(
            f"{where}: {shown(raw)} is not a warm-pool setting; allowed: "
            f"{', '.join(repr(m) for m in WARM_POOL_MODES)} or a Spark Connect URL like sc://spark-connect:15002 "
            "(parameters after a '/': sc://spark-connect:15002/;token=...) or conn:<conn_id>, an Airflow "
            "connection to a Spark Connect server with its token as password"
        )
    return value


def http_url(where: str, raw: object) -> str:
    value = text(where, raw)
    try:
        parts = urlsplit(value)
        valid = parts.scheme in ("http", "https") and bool(parts.hostname)
    except ValueError:
        valid = False
    if not valid:
        fail(f"{where}: {shown(raw)} is not an http(s) URL; allowed: a URL like http://spark-master:8080")
    return value.rstrip("/")


def spark_conf(where: str, raw: object) -> FrozenConf:
    """A JSON object (or mapping) of ``spark.*`` properties, values as Spark's strings; every bad key at once."""
    data: object = raw
    if isinstance(raw, str):
        try:
            data = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError:
            data = None
    if not isinstance(data, Mapping):
        # The text may hold secrets that a typo kept from parsing: name it only when it names none.
        what = repr(raw) if not SECRET_KEY_PATTERN.search(str(raw)) else f"a {type(raw).__name__} (not shown)"
        fail(
            f"{where}: {what} is not a JSON object; allowed: Spark properties such as "
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
            bad = REDACTED if is_secret_key(name) else repr(value)
            problems.append(f"{where}: the value of {name!r} is {bad}; allowed: a string, number or boolean")
    if problems:
        raise ConnectionSettingsError(problems)
    return FrozenConf(conf)
