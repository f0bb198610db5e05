"""The values of a connection's settings from its raw fields: coerced, merged over the installation's defaults,
with the capacity a master implies derived.

The hook hands over what an Airflow connection holds (host, port, password, the extras) and what the
``[finegrained]`` section sets; this turns them into the typed values of
:class:`~.connection.ConnectionSettings`, reporting every problem at once. The concerns composed into the
connection's settings, and the names they declare, are listed here (:data:`CONCERNS`). Pure: no Airflow or
Spark imports.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from typing import Any, Final

from airflow_provider_finegrained.launchers.master import MASTER_FORMS, MasterInfo
from airflow_provider_finegrained.settings.cluster import ClusterSettings, available_cpus, parse_master
from airflow_provider_finegrained.settings.coercion import ConnectionSettingsError
from airflow_provider_finegrained.settings.field import Setting
from airflow_provider_finegrained.settings.history import HistorySettings
from airflow_provider_finegrained.settings.model import SettingsModel
from airflow_provider_finegrained.settings.parallelism import ParallelismSettings
from airflow_provider_finegrained.settings.resources import (
    MEMORY_OVERHEAD_FACTOR,
    MIN_MEMORY_OVERHEAD,
    MiB,
    ResourceSettings,
)
from airflow_provider_finegrained.settings.storage import StorageSettings
from airflow_provider_finegrained.settings.warm_pool import WarmPoolSettings

CONCERNS: Final[tuple[type[SettingsModel], ...]] = (
    ClusterSettings,
    StorageSettings,
    ResourceSettings,
    ParallelismSettings,
    HistorySettings,
    WarmPoolSettings,
)
"""The configs composed into a connection's settings, in the order the form and the docs show them."""
EXTRA_PREFIX: Final = "extra__finegrained_spark__"
"""Prefix of extras written by Airflow's older connection forms; accepted and stripped."""


def settable_fields() -> tuple[str, ...]:
    """Names a connection (or the ``[finegrained]`` section) may set, in declaration order."""
    return tuple(name for concern in CONCERNS for name in concern.model_fields)


def concern_of(name: str) -> type[SettingsModel]:
    """The config that declares the setting ``name``."""
    for concern in CONCERNS:
        if name in concern.model_fields:
            return concern
    raise LookupError(f"{name}: no such setting; known: {', '.join(settable_fields())}")


def setting_of(name: str) -> Setting:
    """The declaration (label, description, kind, coercion, secrets...) of the setting ``name``."""
    return concern_of(name).declaration(name)


def field_default(name: str) -> Any:
    """The declared default of a setting (``None`` for derived or required ones)."""
    info = concern_of(name).model_fields[name]
    if info.is_required():
        return None
    return info.get_default(call_default_factory=True)


def connection_values(
    host: str | None,
    extras: Mapping[str, Any],
    *,
    defaults: Mapping[str, Any],
    airflow_home: str,
    port: int | None = None,
    password: str | None = None,
) -> dict[str, Any]:
    """The typed value of every setting that is set or derived (see ``ConnectionSettings.from_connection_fields``)."""
    problems: list[str] = []
    given = _clean(extras, "connection extra", problems)
    installed = _clean(defaults, "[finegrained] option", problems)
    master, master_where = _resolve_master(host, port, given, installed, problems)
    values = _coerced(given, installed, problems)
    if password:
        _add_password(values, password, problems)
    info: MasterInfo | None = None
    if master is not None:
        try:
            info = parse_master(master)
        except ConnectionSettingsError as exc:
            problems.append(exc.problems[0].replace("master: ", f"{master_where}: ", 1))
    if problems:
        raise ConnectionSettingsError(problems)
    if master is None or info is None:
        master = f"local[{available_cpus()}]"
        info = parse_master(master)
    values["master"] = master
    values.setdefault("storage_root", os.path.join(os.path.expanduser(airflow_home), "finegrained", "storage"))
    _derive_capacity(values, info, master, problems)
    if problems:
        raise ConnectionSettingsError(problems)
    return {k: v for k, v in values.items() if v is not None}


def _coerced(given: dict[str, Any], installed: dict[str, Any], problems: list[str]) -> dict[str, Any]:
    """Each setting but the master from the connection, else the installation; ``spark_conf`` merged by key."""
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
    return values


def _add_password(values: dict[str, Any], password: str, problems: list[str]) -> None:
    """The connection's password is Spark's shared authentication secret."""
    conf = dict(values.get("spark_conf", {}))
    if "spark.authenticate.secret" in conf:
        problems.append("password: both the password field and spark_conf 'spark.authenticate.secret' are set")
    conf["spark.authenticate.secret"] = password
    conf.setdefault("spark.authenticate", "true")
    values["spark_conf"] = conf


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
