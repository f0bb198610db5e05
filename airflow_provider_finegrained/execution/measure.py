"""Measure external input files (local paths or fsspec URLs) so a source stage is sized from real bytes."""

from __future__ import annotations

import os

from airflow_provider_finegrained.execution.region_run import ExternalSizes


class ExternalInputError(FileNotFoundError):
    """An external input path does not exist or holds no data files."""


def _hidden(name: str) -> bool:
    # Spark and Hadoop skip files starting with '_' or '.', so they are not data.
    return os.path.basename(name.rstrip("/")).startswith(("_", "."))


def measure_external(path: str, fmt: str) -> ExternalSizes:
    """The size of every data file under ``path`` (a file or a folder), in name order."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(path)
    if not fs.exists(root):
        raise ExternalInputError(f"external input {path} does not exist")
    if fs.isfile(root):
        sizes = [int(fs.size(root))]
    else:
        found = fs.find(root, detail=True)
        relative = {p: p[len(root.rstrip("/")) + 1 :] for p in found}
        data = sorted(p for p, rel in relative.items() if not any(_hidden(part) for part in rel.split("/")))
        sizes = [int(found[p]["size"]) for p in data]
    if not sizes:
        raise ExternalInputError(f"external input {path} holds no data files")
    return ExternalSizes(path=path, format=fmt, file_bytes=sizes)
