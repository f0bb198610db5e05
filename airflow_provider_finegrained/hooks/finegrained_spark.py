"""Airflow hook of the ``finegrained_spark`` connection: settings from the connection and ``[finegrained]``."""

from __future__ import annotations

import os
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_provider_finegrained.hooks.airflow_connection import (
    ACCEPTED_CONN_TYPES,
    CONN_TYPE,
    DEFAULT_CONN_ID,
    connection_env_variable,
    connection_extras,
    connection_forms,
    mask,
    missing_connection_message,
    unreadable_env_message,
)
from airflow_provider_finegrained.hooks.connection_checks import Check, connection_checks
from airflow_provider_finegrained.hooks.storage_connection import connection_storage_options
from airflow_provider_finegrained.settings import (
    ConnectionSettings,
    ConnectionSettingsError,
    settable_fields,
)

CONFIG_SECTION = "finegrained"


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
