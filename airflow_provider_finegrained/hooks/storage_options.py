"""fsspec storage options for the storage root, from the Airflow connection named by ``storage_conn_id``.

Airflow's ``ObjectStoragePath(conn_id=...)`` hands the connection to the filesystem a provider registers
for the scheme (the amazon provider's for ``s3``, google's for ``gs``). This module maps the same
connection fields to the options of the fsspec filesystem itself, so the provider's storage code works
with or without those providers installed:

- ``s3``, ``s3a``, ``s3n`` (s3fs), from an ``aws`` connection: login / password or the extras
  ``aws_access_key_id`` / ``aws_secret_access_key`` become ``key`` / ``secret``, ``aws_session_token``
  becomes ``token``, the extras ``endpoint_url`` (or ``service_config.s3.endpoint_url``) and ``region_name``
  go to ``client_kwargs``, ``config_kwargs`` is passed through;
- ``gs``, ``gcs`` (gcsfs), from a ``google_cloud_platform`` connection: the extra ``key_path`` (a key file)
  or ``keyfile_dict`` (its JSON) becomes ``token``, ``project`` becomes ``project``.

Pure: no Airflow imports. The values are credentials: callers must never log what this returns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from airflow_provider_finegrained.secrets import is_secret_key
from airflow_provider_finegrained.settings.coercion import ConnectionSettingsError

S3_SCHEMES: Final = ("s3", "s3a", "s3n")
GCS_SCHEMES: Final = ("gs", "gcs")
LOCAL_SCHEMES: Final = ("file", "local")
SUPPORTED_SCHEMES: Final = (*S3_SCHEMES, *GCS_SCHEMES)
_GOOGLE_PREFIX: Final = "extra__google_cloud_platform__"


@dataclass(frozen=True)
class StorageConnection:
    """The fields of the connection ``storage_conn_id`` names (as Airflow's ``Connection`` holds them)."""

    conn_id: str
    conn_type: str | None = None
    login: str | None = None
    password: str | None = field(default=None, repr=False)
    extra: Mapping[str, Any] = field(default_factory=dict, repr=False)


def storage_options(scheme: str, conn: StorageConnection) -> dict[str, Any]:
    """The fsspec options of ``scheme``'s filesystem built from ``conn``; empty for local paths.

    A scheme without a mapping is an error naming the connection, the scheme and the supported ones,
    rather than a filesystem silently opened without the credentials the user configured.
    """
    scheme = scheme.lower()
    if scheme in LOCAL_SCHEMES:
        return {}
    if scheme in S3_SCHEMES:
        return _s3_options(conn)
    if scheme in GCS_SCHEMES:
        return _gcs_options(conn)
    raise ConnectionSettingsError(
        f"storage_conn_id: {conn.conn_id!r} cannot be used for a {scheme}:// storage root; allowed: a storage "
        f"root on {', '.join(f'{s}://' for s in SUPPORTED_SCHEMES)} (or a local path), or leave storage_conn_id "
        "unset and configure the filesystem through its own environment"
    )


def _text(extra: Mapping[str, Any], key: str) -> str | None:
    value = extra.get(key)
    return value if isinstance(value, str) and value.strip() else None


def _s3_options(conn: StorageConnection) -> dict[str, Any]:
    extra = conn.extra
    options: dict[str, Any] = {}
    key = conn.login or _text(extra, "aws_access_key_id")
    secret = conn.password or _text(extra, "aws_secret_access_key")
    if key or secret:
        if not (key and secret):
            raise ConnectionSettingsError(
                f"storage_conn_id: connection {conn.conn_id!r} has an access key id without a secret access key "
                "or the reverse; allowed: both (login and password, or the extras aws_access_key_id and "
                "aws_secret_access_key), or neither to use the environment's credentials"
            )
        options["key"], options["secret"] = key, secret
    if token := _text(extra, "aws_session_token"):
        options["token"] = token
    client_kwargs: dict[str, Any] = {}
    service = extra.get("service_config")
    s3_service = service.get("s3") if isinstance(service, Mapping) else None
    endpoint = _text(s3_service, "endpoint_url") if isinstance(s3_service, Mapping) else None
    if endpoint := endpoint or _text(extra, "endpoint_url"):
        client_kwargs["endpoint_url"] = endpoint
    if region := _text(extra, "region_name"):
        client_kwargs["region_name"] = region
    if client_kwargs:
        options["client_kwargs"] = client_kwargs
    config_kwargs = extra.get("config_kwargs")
    if isinstance(config_kwargs, Mapping) and config_kwargs:
        options["config_kwargs"] = dict(config_kwargs)
    return options


def _gcs_options(conn: StorageConnection) -> dict[str, Any]:
    extra = {k.removeprefix(_GOOGLE_PREFIX): v for k, v in conn.extra.items()}
    options: dict[str, Any] = {}
    keyfile = extra.get("keyfile_dict")
    if isinstance(keyfile, str) and keyfile.strip():
        try:
            keyfile = json.loads(keyfile)
        except json.JSONDecodeError:
            raise ConnectionSettingsError(
                f"storage_conn_id: the extra keyfile_dict of connection {conn.conn_id!r} is not valid JSON; "
                "allowed: a service account key as a JSON object"
            ) from None
    if isinstance(keyfile, Mapping) and keyfile:
        options["token"] = dict(keyfile)
    elif key_path := _text(extra, "key_path"):
        options["token"] = key_path
    if project := _text(extra, "project"):
        options["project"] = project
    return options


def secret_option_values(options: Mapping[str, Any]) -> list[str]:
    """The credential strings in ``options`` (to register with a log masker): the values of the options, and of
    the keys of a nested option (a key file's ``private_key``), that the provider's secret rule names
    (Airflow's sensitive names and Spark's redaction pattern: ``secret``, ``token``, ``private_key``...)."""
    values: list[str] = []
    for key, value in options.items():
        if isinstance(value, Mapping):
            values.extend(secret_option_values(value) if is_secret_key(key) else [])
        elif is_secret_key(key) and isinstance(value, str) and value:
            values.append(value)
    return values
