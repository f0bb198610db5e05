"""The storage root's fsspec options as a connection's regions get them: ``storage_conn_id``'s credentials.

The Airflow side of :mod:`hooks.storage_options` (which maps a connection's fields, purely): it reads the
connection and masks what it returns. The hook and a warm pool's start both come here.
"""

from __future__ import annotations

import contextlib
from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException

from airflow_provider_finegrained.hooks.airflow_connection import connection_extras, mask
from airflow_provider_finegrained.hooks.storage_options import StorageConnection, secret_option_values, storage_options
from airflow_provider_finegrained.settings import ConnectionSettings, ConnectionSettingsError


def connection_storage_options(settings: ConnectionSettings, named_by: str) -> dict[str, Any]:
    """fsspec options for the storage root's filesystem, from the connection ``storage_conn_id`` names.

    Empty when ``storage_conn_id`` is unset or the root is local; for an ``hdfs://`` root without it, the
    NameNode's WebHDFS address from ``hadoop_conf_dir`` (``storage/hdfs.py``). The credentials returned are
    registered with Airflow's secrets masker and never logged. `named_by`: the ``finegrained_spark``
    connection whose settings these are (for the message when ``storage_conn_id`` is not defined).
    """
    conn_id = settings.storage_conn_id
    if conn_id is None and settings.storage_scheme == "hdfs":
        from airflow_provider_finegrained.storage.errors import StorageConfigError
        from airflow_provider_finegrained.storage.hdfs import webhdfs_url

        # The Airflow side and the driver's Python reach HDFS over the NameNode's WebHDFS; where no address
        # can be found, the first storage call says so, naming the root and what to set.
        with contextlib.suppress(StorageConfigError):
            return {"webhdfs_url": webhdfs_url(settings.storage_root, settings.hadoop_conf_dir)}
        return {}
    if conn_id is None or settings.storage_is_local:
        return {}
    try:
        conn = BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        raise ConnectionSettingsError(
            f"storage_conn_id: connection {conn_id!r} (named by {named_by!r}) is not "
            "defined; allowed: the id of an Airflow connection holding the storage root's credentials"
        ) from None
    if conn.password:
        mask(conn.password)
    try:
        extra = connection_extras(conn.extra)
    except ConnectionSettingsError as exc:
        raise ConnectionSettingsError(f"storage_conn_id: connection {conn_id!r}: {exc}") from None
    stored = StorageConnection(conn_id, conn.conn_type, conn.login, conn.password, extra)
    options = storage_options(settings.storage_scheme, stored)
    for value in secret_option_values(options):
        mask(value)
    return options
