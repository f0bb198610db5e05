"""Where stage outputs live, and which connection's credentials reach them.

Pure: no Airflow or Spark imports.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from airflow_provider_finegrained.settings import coercion
from airflow_provider_finegrained.settings.coercion import URL_SCHEME
from airflow_provider_finegrained.settings.field import string
from airflow_provider_finegrained.settings.model import SettingsModel


class StorageSettings(SettingsModel):
    """Where stage outputs live, and whose credentials the Airflow side uses to reach them."""

    CONCERN: ClassVar[str] = "storage"

    storage_root: Annotated[
        str,
        string(
            "Storage root",
            "Where stages write their outputs: an absolute local path or an fsspec URL (s3://bucket/prefix, "
            "gs://, hdfs://, abfs://). Every Airflow worker and Spark executor must reach it.",
            "s3://my-bucket/finegrained",
            values="absolute path or fsspec URL",
            check=coercion.storage_root,
            secret="url",
            default_text="$AIRFLOW_HOME/finegrained/storage",
        ),
    ]
    storage_conn_id: Annotated[
        str | None,
        string(
            "Storage connection id",
            "The Airflow connection whose credentials the Airflow side uses to read and write the storage root, "
            "as ObjectStoragePath(conn_id=...) takes it (an aws connection for s3://). Unset: the filesystem's "
            "own defaults (environment, instance role).",
            "aws_default",
            values="Airflow connection id",
            check=coercion.conn_id,
        ),
    ] = None

    @property
    def storage_is_local(self) -> bool:
        """Whether ``storage_root`` is a path on this machine's disk (or a ``file://`` URL)."""
        return not URL_SCHEME.match(self.storage_root) or self.storage_root.startswith("file://")

    @property
    def storage_scheme(self) -> str:
        """The storage root's URL scheme, lower case; ``file`` for a local path."""
        return self.storage_root.split("://", 1)[0] if URL_SCHEME.match(self.storage_root) else "file"
