"""Airflow hook of the ``finegrained_spark`` connection: settings from the connection and ``[finegrained]``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import urllib.error
import urllib.request
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_provider_finegrained.hooks.settings import (
    ConnectionSettings,
    ConnectionSettingsError,
    settable_fields,
)
from airflow_provider_finegrained.planning import format_bytes

CONN_TYPE = "finegrained_spark"
ACCEPTED_CONN_TYPES = (CONN_TYPE, "generic")
CONFIG_SECTION = "finegrained"
MINIMUM_JAVA = 17
WEBUI_TIMEOUT_S = 5.0


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


def missing_connection_message(conn_id: str) -> str:
    env = "AIRFLOW_CONN_" + re.sub(r"[^A-Za-z0-9]", "_", conn_id).upper()
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
    default_conn_name = "finegrained_spark_default"
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
            self._mask(conn.password)
        # `airflow connections add --conn-type` rewrites a type it does not know (provider not installed
        # where the CLI ran) to "generic", so that one is accepted; any other type is a wrong connection.
        if conn.conn_type and conn.conn_type not in ACCEPTED_CONN_TYPES:
            raise ConnectionSettingsError(
                f"connection {conn_id!r} has conn_type {conn.conn_type!r}; allowed: {CONN_TYPE!r}"
            )
        try:
            settings = ConnectionSettings.from_connection_fields(
                conn.host,
                _extras(conn.extra),
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
            self._mask(value)

    @staticmethod
    def _mask(value: str) -> None:
        # The Task SDK's mask_secret also tells the supervisor, so its log output is masked too.
        from airflow.sdk.log import mask_secret

        mask_secret(value)

    def _warn_about(self, settings: ConnectionSettings) -> None:
        if settings.storage_is_local and not settings.is_local:
            self.log.warning(
                "storage_root %s is a local path but master %s runs executors elsewhere: it must be a shared "
                "mount visible to every Spark executor and Airflow worker",
                settings.storage_root,
                settings.master,
            )

    def test_connection(self) -> tuple[bool, str]:
        """Check the settings parse, Java 17+ is here for spark-submit and a spark:// master answers."""
        try:
            settings = self.get_settings()
        except (ConnectionSettingsError, AirflowNotFoundException) as exc:
            return False, str(exc)
        ok, java = _check_java(settings.java_home)
        if not ok:
            return False, java
        if settings.master_kind == "standalone":
            ok, master = _check_standalone(settings)
            return ok, f"{master}; {java}"
        if settings.master_kind in ("local", "local-cluster"):
            return True, (
                f"local Spark ready: master {settings.master}, {settings.total_cores} core(s), "
                f"driver memory {format_bytes(settings.driver_memory)}; {java}"
            )
        return True, f"settings are valid; {settings.master} is reached by spark-submit at run time, not now; {java}"


def _extras(extra: str | None) -> dict[str, Any]:
    # Connection.extra_dejson logs and returns {} for malformed JSON, silently dropping every setting.
    if not extra or not extra.strip():
        return {}
    try:
        data = json.loads(extra)
    except json.JSONDecodeError as exc:
        raise ConnectionSettingsError(f"extra: not valid JSON ({exc.msg} at position {exc.pos})") from None
    if not isinstance(data, dict):
        raise ConnectionSettingsError(f"extra: {type(data).__name__} given; allowed: a JSON object")
    return data


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


def _check_standalone(settings: ConnectionSettings) -> tuple[bool, str]:
    """Ask each standalone master's web UI for its status; an executor must fit an alive worker."""
    failures = []
    for url in settings.webui_json_urls():
        try:
            with urllib.request.urlopen(url, timeout=WEBUI_TIMEOUT_S) as response:
                status = json.loads(response.read().decode("utf-8"))
        except (OSError, ValueError, urllib.error.URLError) as exc:
            failures.append(f"{url}: {exc}")
            continue
        if not isinstance(status, dict) or status.get("status") != "ALIVE":
            state = status.get("status") if isinstance(status, dict) else status
            failures.append(f"{url}: master status {state!r}")
            continue
        return _judge_workers(settings, url, status)
    return False, f"no Spark master of {settings.master} answered as ALIVE: {'; '.join(failures)}"


def _judge_workers(settings: ConnectionSettings, url: str, status: dict[str, Any]) -> tuple[bool, str]:
    workers = [w for w in status.get("workers", []) if isinstance(w, dict) and w.get("state") == "ALIVE"]
    cores = sum(int(w.get("cores", 0)) for w in workers)
    free = sum(int(w.get("coresfree", 0)) for w in workers)
    summary = (
        f"Spark master {status.get('url', settings.master)} is ALIVE ({url}): "
        f"{len(workers)} alive worker(s), {free} of {cores} core(s) free"
    )
    if not workers:
        return False, f"{summary}; start a worker: an application would wait forever for resources"
    need_memory_mib = settings.executor_memory / 2**20
    fitting = [
        w
        for w in workers
        if int(w.get("cores", 0)) >= settings.executor_cores and int(w.get("memory", 0)) >= need_memory_mib
    ]
    if not fitting:
        biggest = max(workers, key=lambda w: (int(w.get("memory", 0)), int(w.get("cores", 0))))
        return False, (
            f"{summary}; no worker can hold one executor of executor_cores {settings.executor_cores}, "
            f"executor_memory {format_bytes(settings.executor_memory)} (the largest has {biggest.get('cores')} "
            f"cores, {biggest.get('memory')} MiB): applications would wait forever"
        )
    return True, summary
