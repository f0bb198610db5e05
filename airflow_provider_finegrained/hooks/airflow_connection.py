"""Reading an Airflow connection: its type, its extras as JSON, its secrets masked, what to say when it is missing
or unreadable.

What both the ``finegrained_spark`` connection and the storage connection it names need; no hook class.
"""

from __future__ import annotations

import json
from typing import Any

from airflow_provider_finegrained.settings import ConnectionSettingsError

CONN_TYPE = "finegrained_spark"
ACCEPTED_CONN_TYPES = (CONN_TYPE, "generic")
DEFAULT_CONN_ID = "finegrained_spark_default"
"""The connection id that may be left undefined (the embedded default: local Spark)."""


def mask(value: str) -> None:
    """Register ``value`` with Airflow's secrets masker."""
    # The Task SDK's mask_secret also tells the supervisor, so its log output is masked too.
    from airflow.sdk.log import mask_secret

    mask_secret(value)


def connection_extras(extra: str | None) -> dict[str, Any]:
    """A connection's extra as a JSON object; ConnectionSettingsError when it is not one."""
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
    """The error for a connection that is not defined: how to define it."""
    env = connection_env_variable(conn_id)
    return (
        f"the {CONN_TYPE} connection {conn_id!r} is not defined; create it with "
        f"`airflow connections add {conn_id} --conn-type {CONN_TYPE} --conn-host 'local[*]'` "
        f'(add --conn-extra \'{{"storage_root": "s3://bucket/prefix"}}\' for more settings), or set '
        f'{env}=\'{{"conn_type": "{CONN_TYPE}", "host": "local[*]"}}\'; '
        f"only {DEFAULT_CONN_ID!r} falls back to local Spark when undefined"
    )
