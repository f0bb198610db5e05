"""Reading an Airflow connection: its type, its extras as JSON, its secrets masked, what to say when it is missing.

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
