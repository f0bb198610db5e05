"""Measure external input files (local paths or any fsspec URL) so a source stage is sized from real bytes."""

from __future__ import annotations

from airflow_provider_finegrained.execution.decision import ExternalSizes
from airflow_provider_finegrained.storage import filesystem
from airflow_provider_finegrained.storage.filesystem import StorageOptions
from airflow_provider_finegrained.storage.locations import join
from airflow_provider_finegrained.storage.parquet_layout import largest_row_group_bytes


class ExternalInputError(FileNotFoundError):
    """An external input path does not exist or holds no data files."""


def _hidden(relative: str) -> bool:
    # Spark and Hadoop skip files and folders starting with '_' or '.', so they are not data.
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


def measure_external(path: str, fmt: str, *, storage_options: StorageOptions = None) -> ExternalSizes:
    """The size of every data file under ``path`` (a file or a folder), in name order; for parquet also
    the largest row group's bytes (from the footers of the largest files)."""
    fs, inner = filesystem.filesystem(path, storage_options)
    fs.invalidate_cache(inner)
    if not fs.exists(inner):
        raise ExternalInputError(f"external input {path} does not exist")
    if fs.isfile(inner):
        files = {path: int(fs.size(inner))}
    else:
        found = filesystem.list_files(path, storage_options)
        files = {join(path, name): found[name] for name in sorted(found) if not _hidden(name)}
    if not files:
        raise ExternalInputError(f"external input {path} holds no data files")
    row_group_bytes = None
    if fmt == "parquet":
        largest_first = sorted(files, key=lambda f: -files[f])
        row_group_bytes = largest_row_group_bytes(largest_first, storage_options)
    return ExternalSizes(path=path, format=fmt, file_bytes=list(files.values()), row_group_bytes=row_group_bytes)
