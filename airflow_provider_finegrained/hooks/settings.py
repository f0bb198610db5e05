"""The settings of a ``finegrained_spark`` connection: one typed model, coerced from strings, validated, redactable.

Each setting is declared once, as a field of a per-concern model (``declarations``: cluster, storage,
resources, parallelism, warm pool) with a :class:`~.setting.Setting` as its metadata;
:class:`ConnectionSettings` joins them and adds the rules across concerns. The connection form's fields,
the ``[finegrained]`` options (``connection_form``) and the coercion of raw strings all come from those
declarations.

Pure (no Airflow imports): the hook feeds it a connection's fields and the ``[finegrained]`` config
section; the planner, the CLI and tests can build settings from plain mappings.
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, Self

from pydantic import model_validator

from airflow_provider_finegrained.hooks.coercion import RESERVED_CONF, WARM_POOL_MODES, ConnectionSettingsError
from airflow_provider_finegrained.hooks.declarations import (
    DEPLOY_MODES,
    EMBEDDED_WARM_POOL,
    EXTRA_PREFIX,
    MEMORY_OVERHEAD_FACTOR,
    MIN_MEMORY_OVERHEAD,
    SPARK_MIN_MEMORY,
    ClusterSettings,
    GiB,
    MiB,
    ParallelismSettings,
    ResourceSettings,
    SettingsModel,
    StorageSettings,
    WarmPoolSettings,
    available_cpus,
    parse_master,
    setting_in,
)
from airflow_provider_finegrained.hooks.setting import Setting
from airflow_provider_finegrained.launchers.master import MASTER_FORMS, MasterInfo, MasterKind
from airflow_provider_finegrained.planning import ClusterProfile, WorkerShape, check_resource_stability, format_bytes
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
    "MEMORY_OVERHEAD_FACTOR",
    "MIN_MEMORY_OVERHEAD",
    "REDACTED",
    "RESERVED_CONF",
    "SECRET_KEY_PATTERN",
    "SPARK_MIN_MEMORY",
    "WARM_POOL_MODES",
    "ClusterSettings",
    "ConnectionSettings",
    "ConnectionSettingsError",
    "GiB",
    "MasterInfo",
    "MasterKind",
    "MiB",
    "ParallelismSettings",
    "ResourceSettings",
    "SettingsModel",
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

_NO_DEFAULTS: Final[Mapping[str, Any]] = MappingProxyType({})


# Reversed MRO is declaration order: cluster, storage, resources, parallelism, warm pool.
_PLAIN_SETTING = re.compile(r"(?i)true|false|yes|no|on|off|none|null")


def _plain_setting(value: str) -> bool:
    """Whether a value is a boolean word: a switch, never a credential (a number may be a PIN: it is masked)."""
    return _PLAIN_SETTING.fullmatch(value.strip()) is not None


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

    def secret_values(self) -> list[str]:
        """Values to register with a log masker: secret Spark properties, URL passwords and URL tokens.

        Not a boolean word: Airflow's names match broadly (``...authorization.enabled``, ``...proxy.ssl``), and
        masking ``false`` would blank that word in every log.
        """
        values = [v for k in sorted(self.secret_conf_keys) if (v := self.spark_conf[k]) and not _plain_setting(v)]
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
    return setting_in(ConnectionSettings, name)


def field_default(name: str) -> Any:
    """The model's default of a field (``None`` for derived or required ones)."""
    info = ConnectionSettings.model_fields.get(name)
    if info is None or info.is_required():
        return None
    return info.get_default(call_default_factory=True)


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
