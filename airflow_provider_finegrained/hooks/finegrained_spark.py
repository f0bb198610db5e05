"""Airflow hook of the ``finegrained_spark`` connection: settings from the connection and ``[finegrained]``."""

from __future__ import annotations

import base64
import os
import re
import shutil
import socket
import subprocess
import urllib.parse
from typing import TYPE_CHECKING, Any, NamedTuple

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_provider_finegrained.hooks.airflow_connection import (
    ACCEPTED_CONN_TYPES,
    CONN_TYPE,
    DEFAULT_CONN_ID,
    connection_extras,
    mask,
)
from airflow_provider_finegrained.hooks.storage_connection import connection_storage_options
from airflow_provider_finegrained.planning import format_bytes
from airflow_provider_finegrained.settings import (
    ConnectionSettings,
    ConnectionSettingsError,
    settable_fields,
)

if TYPE_CHECKING:
    from airflow_provider_finegrained.capacity.sources import ClusterCapacity
    from airflow_provider_finegrained.planning import WorkerCapacity

CONFIG_SECTION = "finegrained"
MINIMUM_JAVA = 17
WEBUI_TIMEOUT_S = 5.0
SPARK_CONNECT_PORT = 15002


def read_config_defaults() -> dict[str, Any]:
    """The options set in Airflow's ``[finegrained]`` section (file, ``AIRFLOW__FINEGRAINED__*``, ``_CMD``)."""
    from airflow.sdk import conf

    defaults: dict[str, Any] = {}
    for name in settable_fields():
        try:
            value = conf.get(CONFIG_SECTION, name, fallback=None)
        except Exception as exc:  # a failing _CMD or _SECRET: say which option rather than use a wrong default
            raise ConnectionSettingsError(f"[{CONFIG_SECTION}] {name}: cannot be read ({exc})") from exc
        if value is not None and str(value).strip():
            defaults[name] = value
    return defaults


def airflow_home() -> str:
    """``$AIRFLOW_HOME`` as Airflow resolves it (``~/airflow`` when unset)."""
    return os.path.expanduser(os.path.expandvars(os.environ.get("AIRFLOW_HOME") or "~/airflow"))


def connection_env_variable(conn_id: str) -> str:
    """The environment variable Airflow reads the connection from (its own spelling: the id in upper case)."""
    return "AIRFLOW_CONN_" + conn_id.upper()


def connection_forms(conn_id: str) -> str:
    """How to write the connection's environment variable, as JSON and as a URI."""
    env = connection_env_variable(conn_id)
    return (
        f'{env}=\'{{"conn_type": "{CONN_TYPE}", "host": "local[*]"}}\' (JSON) or '
        f"{env}='finegrained-spark://?master=local%5B*%5D' (URI; the master URL-encoded)"
    )


def unreadable_env_message(conn_id: str) -> str:
    """The error for a connection variable that is set but that Airflow cannot parse (never its value)."""
    return (
        f"the environment variable {connection_env_variable(conn_id)} is set but Airflow cannot read connection "
        f"{conn_id!r} from it (not valid JSON, nor a connection URI); write it as {connection_forms(conn_id)}"
    )


def missing_connection_message(conn_id: str) -> str:
    env = connection_env_variable(conn_id)
    return (
        f"the {CONN_TYPE} connection {conn_id!r} is not defined; create it with "
        f"`airflow connections add {conn_id} --conn-type {CONN_TYPE} --conn-host 'local[*]'` "
        f'(add --conn-extra \'{{"storage_root": "s3://bucket/prefix"}}\' for more settings), or set '
        f'{env}=\'{{"conn_type": "{CONN_TYPE}", "host": "local[*]"}}\'; '
        f"only {FineGrainedSparkHook.default_conn_name!r} falls back to local Spark when undefined"
    )


class FineGrainedSparkHook(BaseHook):
    """Reads a ``finegrained_spark`` connection into :class:`ConnectionSettings`.

    The default connection id may be left undefined: it then means local Spark on this machine's
    cores with storage under ``$AIRFLOW_HOME/finegrained/storage`` (the embedded default).
    """

    conn_name_attr = "finegrained_spark_conn_id"
    default_conn_name = DEFAULT_CONN_ID
    conn_type = CONN_TYPE
    hook_name = "Fine-grained Spark"

    def __init__(self, finegrained_spark_conn_id: str = default_conn_name) -> None:
        super().__init__()
        self.finegrained_spark_conn_id = finegrained_spark_conn_id
        self.used_embedded_default = False
        self._settings: ConnectionSettings | None = None

    def get_conn(self) -> ConnectionSettings:
        return self.get_settings()

    def get_settings(self) -> ConnectionSettings:
        """The connection's settings over the ``[finegrained]`` defaults (read once per hook)."""
        if self._settings is None:
            self._settings = self._load_settings()
            self._mask_secrets(self._settings)
            self._warn_about(self._settings)
        return self._settings

    def _load_settings(self) -> ConnectionSettings:
        conn_id = self.finegrained_spark_conn_id
        defaults = read_config_defaults()
        try:
            conn = self.get_connection(conn_id)
        except AirflowNotFoundException:
            # Airflow calls a variable it cannot parse (JSON without its closing brace) "not defined": that is
            # a broken connection, not a missing one, and must not fall back to the embedded default.
            if os.environ.get(connection_env_variable(conn_id)):
                raise ConnectionSettingsError(unreadable_env_message(conn_id)) from None
            if conn_id != self.default_conn_name:
                raise AirflowNotFoundException(missing_connection_message(conn_id)) from None
            settings = ConnectionSettings.embedded_default(airflow_home=airflow_home(), defaults=defaults)
            self.used_embedded_default = True
            self.log.info(
                "Connection %r is not defined: using the embedded default, %s with %d cores, storage at %s",
                conn_id,
                settings.master,
                settings.total_cores,
                settings.storage_root,
            )
            return settings
        if conn.password:
            mask(conn.password)
        # A variable holding only a master URL (`local[4]`) is parsed as a URI with no scheme: no type.
        if not conn.conn_type:
            raise ConnectionSettingsError(
                f"connection {conn_id!r} has no conn_type; conn_type must be {CONN_TYPE!r} (or 'generic'); "
                f"the master goes in its host: e.g. {connection_forms(conn_id)}"
            )
        # `airflow connections add --conn-type` rewrites a type it does not know (provider not installed
        # where the CLI ran) to "generic", so that one is accepted; any other type is a wrong connection.
        if conn.conn_type not in ACCEPTED_CONN_TYPES:
            raise ConnectionSettingsError(
                f"connection {conn_id!r} has conn_type {conn.conn_type!r}; allowed: {CONN_TYPE!r}"
            )
        try:
            settings = ConnectionSettings.from_connection_fields(
                conn.host,
                connection_extras(conn.extra),
                defaults=defaults,
                airflow_home=airflow_home(),
                port=conn.port,
                password=conn.password,
            )
        except ConnectionSettingsError as exc:
            raise ConnectionSettingsError([f"connection {conn_id!r}: {p}" for p in exc.problems]) from None
        self.log.info("Connection %r: %s", conn_id, settings.redacted())
        return settings

    def _mask_secrets(self, settings: ConnectionSettings) -> None:
        for value in settings.secret_values():
            mask(value)

    def _warn_about(self, settings: ConnectionSettings) -> None:
        if settings.storage_is_local and not settings.is_local:
            self.log.warning(
                "storage_root %s is a local path but master %s runs executors elsewhere: it must be a shared "
                "mount visible to every Spark executor and Airflow worker",
                settings.storage_root,
                settings.master,
            )

    def storage_options(self, settings: ConnectionSettings | None = None) -> dict[str, Any]:
        """fsspec options for the storage root's filesystem, from the connection ``storage_conn_id`` names.

        Empty when ``storage_conn_id`` is unset or the root is local; for an ``hdfs://`` root without it, the
        NameNode's WebHDFS address from ``hadoop_conf_dir`` (``storage/hdfs.py``). The credentials it returns are
        registered with Airflow's secrets masker and never logged; see ``hooks.storage_options`` for the
        mapping per scheme (s3 from an ``aws`` connection, gs from a ``google_cloud_platform`` one). ``settings``:
        those of this hook's connection, when the caller has them already.
        """
        return connection_storage_options(settings or self.get_settings(), self.finegrained_spark_conn_id)

    def test_connection(self) -> tuple[bool, str]:
        """Check the settings, Java, the master and every service the connection names; one readable message.

        The message lists each check in turn (``ok``/``FAILED``); the result is False if any failed. The
        ``storage`` check writes, reads back and deletes a small object under the storage root.
        """
        try:
            settings = self.get_settings()
        except (ConnectionSettingsError, AirflowNotFoundException) as exc:
            return False, str(exc)
        checks = connection_checks(settings, storage=self._storage_check(settings))
        return all(c.ok for c in checks), "; ".join(str(c) for c in checks)

    def _storage_check(self, settings: ConnectionSettings) -> Check:
        """Write, read back and delete a small object under the storage root, with ``storage_conn_id``'s credentials."""
        from airflow_provider_finegrained.storage.errors import StorageError
        from airflow_provider_finegrained.storage.probe import probe

        try:
            options = self.storage_options()
        except ConnectionSettingsError as exc:
            return Check("storage", False, str(exc))
        try:
            return Check("storage", True, probe(settings.storage_root, options))
        except StorageError as exc:
            # The probe's first line names the root (redacted), the step and the cause; a filesystem's own
            # text after it can run to pages (pyarrow's HDFS lists every libjvm path it tried).
            return Check("storage", False, str(exc).splitlines()[0])


def _check_java(java_home: str | None) -> tuple[bool, str]:
    """Java 17+ on this machine: spark-submit is a JVM program even when the cluster is elsewhere."""
    try:
        from airflow_provider_finegrained.spark.java import SparkEnvironmentError, check_java
    except ImportError:
        return _check_java_directly(java_home)
    try:
        info = check_java(java_home=java_home)
    except SparkEnvironmentError as exc:
        return False, str(exc)
    return True, f"Java {info.version} at {info.executable}"


def _check_java_directly(java_home: str | None) -> tuple[bool, str]:
    home = java_home or os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java:
        return False, f"no java on PATH and JAVA_HOME is not set; Spark needs Java {MINIMUM_JAVA}+"
    try:
        done = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, f"could not run {java} -version: {exc}"
    match = re.search(r'version\s+"(\d+)(?:\.(\d+))?[^"]*"', done.stderr + done.stdout)
    if match is None:
        return False, f"{java} -version printed no version; Spark needs Java {MINIMUM_JAVA}+"
    major = int(match.group(2)) if match.group(1) == "1" and match.group(2) else int(match.group(1))
    if major < MINIMUM_JAVA:
        return False, f"Spark needs Java {MINIMUM_JAVA} or newer, but {java} is Java {major}"
    return True, f"Java {major} at {java}"


# -- test_connection ------------------------------------------------------------------------------------------


class Check(NamedTuple):
    """One line of ``test_connection``'s message."""

    name: str
    ok: bool
    detail: str

    def __str__(self) -> str:
        return f"{self.name}: {self.detail}" if self.ok else f"{self.name} FAILED: {self.detail}"


def connection_checks(settings: ConnectionSettings, storage: Check | None = None) -> list[Check]:
    """Every check of a parsed connection: settings, Java, the master, ``storage`` (the hook probes it), the
    history server, the warm pool."""
    from airflow_provider_finegrained.planning.capacity import minimum_slots

    least_slots = minimum_slots(
        {"min_parallelism": settings.min_parallelism}, settings.min_slots, settings.cluster_profile().total_cores
    )
    checks = [_settings_check(settings, least_slots)]
    java_ok, java = _check_java(settings.java_home)
    checks.append(Check("java", java_ok, java))
    checks.extend(_master_checks(settings, least_slots))
    if storage is not None:
        checks.append(storage)
    if settings.history_server_url:
        checks.append(_history_check(settings.history_server_url))
    if urllib.parse.urlsplit(settings.warm_pool).scheme == "sc":
        checks.append(_warm_pool_check(settings.warm_pool))
    elif settings.warm_pool.startswith("conn:"):
        checks.append(_warm_pool_connection_check(settings.warm_pool.removeprefix("conn:")))
    return checks


def _settings_check(settings: ConnectionSettings, least_slots: int) -> Check:
    # Construction already refused inconsistent settings; say what they amount to.
    profile = settings.cluster_profile()
    shape = "local threads" if profile.local else "executors"
    text = (
        f"consistent: master {settings.master} ({settings.deploy_mode} mode), up to {profile.total_cores} core(s) "
        f"and {format_bytes(profile.total_memory)} per application in {shape} of {profile.executor_cores} core(s), "
        f"{format_bytes(profile.executor_memory)}; a region runs with at least {least_slots} slot(s)"
    )
    least, most = _executor_bounds(settings)
    if least or most is not None:
        text += f"; min/max resources hold with {least} to {'any' if most is None else most} executor(s)"
    return Check("settings", True, text)


def _executor_bounds(settings: ConnectionSettings) -> tuple[int, int | None]:
    """Whole executors the minimum and maximum resources ask for (the check passed when the settings were made)."""
    from airflow_provider_finegrained.planning import WorkerShape, check_resource_stability

    profile = settings.cluster_profile()
    shape = WorkerShape(slots=profile.executor_cores, cpu=float(profile.executor_cores), memory=profile.executor_memory)
    return check_resource_stability(settings.resource_bounds(), shape)


def _master_checks(settings: ConnectionSettings, least_slots: int) -> list[Check]:
    from airflow_provider_finegrained.capacity.sources import CapacityUnavailable
    from airflow_provider_finegrained.launchers.standalone.capacity import fetch_standalone_capacity, webui_text
    from airflow_provider_finegrained.launchers.yarn.capacity import DEFAULT_QUEUE, fetch_yarn_capacity

    kind = settings.master_kind
    if kind in ("local", "local-cluster"):
        return [Check("master", True, f"{settings.master} runs on this machine ({settings.total_cores} core(s))")]
    if kind == "k8s":
        host, port = _k8s_api(settings.master)
        return [_tcp_check("master", f"Kubernetes API server {host}:{port}", host, port)]
    if kind == "yarn" and not settings.yarn_resourcemanager_url:
        return [
            Check(
                "master",
                True,
                "yarn is reached by spark-submit at run time (HADOOP_CONF_DIR); set yarn_resourcemanager_url "
                "to check the ResourceManager here",
            )
        ]
    try:
        if kind == "standalone":
            what = f"standalone master {settings.master}"
            asked = f" ({webui_text(settings)})"
            capacity = fetch_standalone_capacity(settings.webui_json_urls(), timeout_s=WEBUI_TIMEOUT_S)
        else:
            what, asked = "YARN ResourceManager", ""
            queue = str(settings.spark_conf.get("spark.yarn.queue") or DEFAULT_QUEUE)
            capacity = fetch_yarn_capacity(str(settings.yarn_resourcemanager_url), WEBUI_TIMEOUT_S, queue=queue)
    except CapacityUnavailable as exc:
        return [Check("master", False, f"{what}{asked} is not reachable: {exc}")]
    # A standalone master books spark.executor.memory against a worker; YARN containers hold the overhead too.
    overhead = 0 if kind == "standalone" else _overhead(settings.executor_memory)
    return [_reachable_check(what, capacity), _fit_check(settings, capacity, overhead, least_slots)]


def _total_cores(worker: WorkerCapacity) -> int:
    # A source that reports no totals (None) knows only what is free: that is the most it can show.
    return worker.free_cores if worker.total_cores is None else worker.total_cores


def _total_memory(worker: WorkerCapacity) -> int:
    return worker.free_memory if worker.total_memory is None else worker.total_memory


def _reachable_check(what: str, capacity: ClusterCapacity) -> Check:
    workers = capacity.workers
    cores = sum(_total_cores(w) for w in workers)
    memory = sum(_total_memory(w) for w in workers)
    text = (
        f"{what} reachable, {len(workers)} alive worker(s), {capacity.total_free_cores} of {cores} core(s) and "
        f"{format_bytes(capacity.total_free_memory)} of {format_bytes(memory)} free ({capacity.source})"
    )
    if not workers:
        return Check("master", False, f"{text}; start a worker: an application would wait forever for resources")
    return Check("master", True, text)


def _fit_check(settings: ConnectionSettings, capacity: ClusterCapacity, overhead: int, least_slots: int) -> Check:
    cores, memory = settings.executor_cores, settings.executor_memory + overhead
    shape = f"{cores} core(s), {format_bytes(memory)}" + (" with overhead" if overhead else "")
    per_worker = [min(_total_cores(w) // cores, _total_memory(w) // memory) for w in capacity.workers]
    fitting = sum(1 for n in per_worker if n)
    if not capacity.workers:
        return Check("executor", False, f"one executor of {shape} has no worker to run on")
    if not fitting:
        biggest = max(capacity.workers, key=lambda w: (_total_memory(w), _total_cores(w)))
        return Check(
            "executor",
            False,
            f"no worker can hold one executor of {shape} (executor_cores, executor_memory; the largest has "
            f"{_total_cores(biggest)} core(s), {format_bytes(_total_memory(biggest))}): applications would wait "
            "forever",
        )
    free_now = sum(1 for w in capacity.workers if w.free_cores >= cores and w.free_memory >= memory)
    text = f"one executor of {shape} fits {fitting} of {len(capacity.workers)} worker(s) ({free_now} with room now)"
    least, _ = _executor_bounds(settings)
    need = max(least, -(-least_slots // cores))
    if sum(per_worker) < need:
        return Check(
            "executor",
            False,
            f"{text}, but the minimum resources (min_slots, min_cpu, min_memory, min_parallelism) need {need} "
            f"executor(s) and the whole cluster holds {sum(per_worker)}",
        )
    return Check("executor", True, text)


def _overhead(executor_memory: int) -> int:
    from airflow_provider_finegrained.settings.resources import MEMORY_OVERHEAD_FACTOR, MIN_MEMORY_OVERHEAD

    return max(MIN_MEMORY_OVERHEAD, int(MEMORY_OVERHEAD_FACTOR * executor_memory))


def _history_check(url: str) -> Check:
    """A history server lists its applications at ``/api/v1/applications``; user info becomes basic auth."""
    from airflow_provider_finegrained.launchers.http import HttpRequestError, get_json

    public, auth = _split_credentials(url)
    headers = {"Authorization": f"Basic {auth}"} if auth else {}
    try:
        answer = get_json(f"{public}/api/v1/applications?limit=1", WEBUI_TIMEOUT_S, headers=headers)
    except HttpRequestError as exc:  # unreachable, timed out, an error status or no JSON
        return Check("history server", False, f"{public} is not reachable: {exc.reason}")
    if not isinstance(answer, list):
        return Check("history server", False, f"{public} did not answer a list of applications")
    listed = "no applications yet" if not answer else "applications listed"
    return Check("history server", True, f"{public} reachable ({listed})")


def _warm_pool_check(url: str) -> Check:
    # Only host and port: an sc:// URL may carry a token in its parameters.
    parts = urllib.parse.urlsplit(url)
    host, port = parts.hostname or "", parts.port or SPARK_CONNECT_PORT
    return _tcp_check("warm pool", f"Spark Connect server sc://{host}:{port}", host, port)


def _warm_pool_connection_check(conn_id: str) -> Check:
    """The server an external pool's Airflow connection names (its token stays in the connection)."""
    from airflow_provider_finegrained.warm.external import external_from_connection
    from airflow_provider_finegrained.warm.state import WarmPoolUnavailable

    try:
        url, _ = external_from_connection(conn_id)
    except WarmPoolUnavailable as exc:
        return Check("warm pool", False, str(exc))
    return _warm_pool_check(url)


def _tcp_check(name: str, what: str, host: str, port: int) -> Check:
    try:
        with socket.create_connection((host, port), timeout=WEBUI_TIMEOUT_S):
            pass
    except OSError as exc:
        return Check(name, False, f"{what} is not reachable: {_reason(exc)}")
    return Check(name, True, f"{what} accepts connections")


def _k8s_api(master: str) -> tuple[str, int]:
    rest = master.removeprefix("k8s://")
    parts = urllib.parse.urlsplit(rest if "://" in rest else f"https://{rest}")
    return parts.hostname or "", parts.port or (80 if parts.scheme == "http" else 443)


def _split_credentials(url: str) -> tuple[str, str | None]:
    """The URL without user info, and that user info as a basic-auth token."""
    from airflow_provider_finegrained.launchers.links import public_url

    parts = urllib.parse.urlsplit(url)
    public = public_url(url) or url
    if parts.username is None:
        return public, None
    user = urllib.parse.unquote(parts.username)
    password = urllib.parse.unquote(parts.password or "")
    return public, base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def _reason(exc: BaseException) -> str:
    reason = getattr(exc, "reason", None)
    return str(reason if reason is not None else exc) or type(exc).__name__
