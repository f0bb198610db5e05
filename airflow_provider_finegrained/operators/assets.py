"""A stage's committed output as an Airflow asset: DAGs downstream can be scheduled on it.

The asset's URI is the output's storage URI, so it needs a location that is the same in every run:
the stage's ``output_path`` (the default location changes with the run and the try). Each successful
run emits an asset event whose ``extra`` says what was committed (rows, bytes, the committed files'
folder, the try), so a consumer DAG reads exactly that data.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from airflow_provider_finegrained.storage.locations import is_local, normalize_root

__all__ = ["asset_event_extra", "output_asset", "output_asset_uri"]

_TEMPLATE = re.compile(r"{{|{%")
_S3 = re.compile(r"^s3[an]?://", re.IGNORECASE)


def output_asset_uri(stage: str, output_path: str | None) -> str:
    """The asset URI of a stage's output: ``file:///abs/path`` locally, ``s3://`` for s3a/s3n, else as given.

    ValueError naming the stage when there is no fixed location to name.
    """
    if not output_path:
        raise ValueError(
            f"stage {stage!r}: output_asset=True needs output_path: the default output location changes "
            "with every run and try, an asset needs one location (e.g. output_path='s3://lake/exports/orders')"
        )
    if _TEMPLATE.search(output_path):
        raise ValueError(
            f"stage {stage!r}: output_asset=True needs a fixed output_path, got the template {output_path!r}; "
            "an asset's URI is fixed when the DAG is parsed"
        )
    if is_local(output_path):
        return "file://" + normalize_root(output_path, "output_path").rstrip("/")
    if _S3.match(output_path):
        return "s3://" + output_path.split("://", 1)[1].rstrip("/")
    return output_path.rstrip("/")


def output_asset(stage: str, output_path: str | None) -> Any:
    """The ``airflow.sdk.Asset`` of a stage's output (named after the stage's output URI)."""
    from airflow.sdk import Asset

    return Asset(uri=output_asset_uri(stage, output_path))


def asset_event_extra(record: Mapping[str, Any]) -> dict[str, Any]:
    """What an asset event says about the committed output (from the stage's XCom output record)."""
    keys = ("stage", "path", "data_path", "format", "rows", "total_bytes", "try_number")
    return {key: record[key] for key in keys if key in record}
