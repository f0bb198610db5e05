"""Writing a stage's output and committing it: the attempt prefix, the measured files, the one marker.

The protocol, its layout and fencing are described in :mod:`runtime.output`. Runs in the operator and
inside the Spark driver; pyspark and pyarrow are imported lazily.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from airflow_provider_finegrained.runtime.fence import Fence
from airflow_provider_finegrained.runtime.output import (
    ATTEMPT_PREFIX,
    MARKER,
    SUPPORTED_FORMATS,
    CommittedOutput,
    FencedError,
    OutputAlreadyExistsError,
    OutputCorruptError,
    OutputError,
    OutputNotCommittedError,
    read_committed,
    read_marker,
)
from airflow_provider_finegrained.storage import filesystem
from airflow_provider_finegrained.storage.filesystem import StorageOptions
from airflow_provider_finegrained.storage.locations import ensure_inside_root, join, relative_to, spark_uri

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

_PART_NUMBER = re.compile(r"part-(\d+)")


def _check_format(fmt: str) -> None:
    if fmt not in SUPPORTED_FORMATS:
        raise ValueError(f"unsupported output format {fmt!r}; supported: {', '.join(SUPPORTED_FORMATS)}")


def _hidden(relative: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


def _part_sort_key(relative: str) -> tuple[str, int, str]:
    folder, _, name = relative.rpartition("/")
    match = _PART_NUMBER.match(name)
    return folder, int(match.group(1)) if match else -1, name


def _check_fence(fence: Fence | None, location: str, step: str, storage_options: StorageOptions) -> None:
    if fence is None:
        return
    newer = fence.superseded_by(storage_options)
    if newer is not None:
        raise FencedError(
            f"try {fence.token} may not {step} {location}: try {newer} of the stage has superseded it "
            f"(fence {fence.folder}); this try's work is discarded and try {newer}'s output is the one read"
        )


def begin_output(location: str, *, storage_options: StorageOptions = None, fence: Fence | None = None) -> str:
    """Check that ``location`` is not committed yet and return a fresh staging prefix inside it (not created).

    With ``fence``, FencedError if a newer try has revoked it: no work starts for a superseded try.
    """
    _check_fence(fence, location, "write", storage_options)
    marker = join(location, MARKER)
    if filesystem.exists(marker, storage_options):
        try:
            read_marker(location, storage_options)
        except OutputNotCommittedError:
            pass  # a superseded try's marker: the commit replaces it
        else:
            raise OutputAlreadyExistsError(f"output {location} already exists; refusing to write it again")
    filesystem.make_folder(location, storage_options)
    return join(location, f"{ATTEMPT_PREFIX}{uuid.uuid4().hex}")


def data_files(folder: str, *, storage_options: StorageOptions = None) -> list[str]:
    """Relative paths of the data files under ``folder`` in part order, skipping hidden ``_``/``.`` names."""
    return sorted(
        (name for name in filesystem.list_files(folder, storage_options) if not _hidden(name)), key=_part_sort_key
    )


def count_rows(paths: list[str], fmt: str, *, storage_options: StorageOptions = None) -> int:
    """Rows in the given files (paths or URLs), from their footers only: no data is read."""
    _check_format(fmt)
    try:
        import pyarrow.orc as orc  # type: ignore[import-untyped, unused-ignore]
        import pyarrow.parquet as pq  # type: ignore[import-untyped, unused-ignore]
    except ImportError as exc:
        raise OutputError("counting output rows needs pyarrow: pip install pyarrow") from exc
    rows = 0
    for path in paths:
        with filesystem.open_file(path, "rb", storage_options) as handle:
            rows += int(pq.read_metadata(handle).num_rows) if fmt == "parquet" else int(orc.ORCFile(handle).nrows)
    return rows


def _publish(location: str, output: CommittedOutput, storage_options: StorageOptions) -> None:
    """The commit's one publishing step: create the marker, exclusively, after every data file exists.

    Fenced: the token is checked right before the marker is created and again after; a try that lost
    in between removes its own marker (readers would refuse it anyway: its token is no longer current).
    A superseded try's marker at the same location (a fixed ``output_path``) is replaced.
    """
    marker = join(location, MARKER)
    body = json.dumps(output.to_dict() | {"committed_at": datetime.now(UTC).isoformat()}, indent=1).encode()
    _check_fence(output.fence, location, "publish", storage_options)
    try:
        filesystem.create_exclusive(marker, body, storage_options)
    except FileExistsError as exc:
        if not _superseded_marker(location, storage_options):
            raise OutputAlreadyExistsError(f"output {location} was committed by another writer meanwhile") from exc
        filesystem.remove(marker, storage_options)
        try:
            filesystem.create_exclusive(marker, body, storage_options)
        except FileExistsError as again:
            raise OutputAlreadyExistsError(f"output {location} was committed by another writer meanwhile") from again
    try:
        _check_fence(output.fence, location, "publish", storage_options)
        read_committed(location, storage_options=storage_options)  # every listed file there, with its size
    except OutputError:
        with contextlib.suppress(OutputError, OSError):
            if read_marker(location, storage_options, check_fence=False).attempt == output.attempt:
                filesystem.remove(marker, storage_options)
        raise


def _superseded_marker(location: str, storage_options: StorageOptions) -> bool:
    try:
        read_marker(location, storage_options)
    except OutputNotCommittedError:
        return filesystem.exists(join(location, MARKER), storage_options)
    except OutputCorruptError:
        return False
    return False


def commit_output(
    staging: str,
    location: str,
    fmt: str = "parquet",
    *,
    storage_options: StorageOptions = None,
    fence: Fence | None = None,
) -> CommittedOutput:
    """Measure the files written to ``staging`` (from :func:`begin_output`) and commit them as ``location``."""
    _check_format(fmt)
    try:
        attempt = relative_to(location, staging)
    except ValueError:
        attempt = ""
    if not attempt.startswith(ATTEMPT_PREFIX) or "/" in attempt:
        raise ValueError(f"staging {staging} is not an attempt prefix of {location}; get one from begin_output")
    listing = filesystem.list_files(staging, storage_options)
    files = sorted((name for name in listing if not _hidden(name)), key=_part_sort_key)
    if not files:
        raise OutputError(f"no data files were written to {staging}; nothing to commit for {location}")
    output = CommittedOutput(
        path=location,
        format=fmt,
        partition_bytes=[listing[name] for name in files],
        rows=count_rows([join(staging, name) for name in files], fmt, storage_options=storage_options),
        files=[f"{attempt}/{name}" for name in files],
        attempt=attempt,
        fence=fence,
    )
    _publish(location, output, storage_options)
    return output


def write_with(
    location: str,
    write: Callable[[str], None],
    fmt: str = "parquet",
    *,
    storage_options: StorageOptions = None,
    fence: Fence | None = None,
) -> CommittedOutput:
    """Run ``write(staging)``, then commit; the attempt's files are removed if anything fails.

    A try superseded meanwhile (``fence``) removes only its own attempt's files, never a newer try's.
    """
    _check_format(fmt)
    staging = begin_output(location, storage_options=storage_options, fence=fence)
    try:
        write(staging)
        return commit_output(staging, location, fmt, storage_options=storage_options, fence=fence)
    except BaseException:
        filesystem.remove(staging, storage_options)
        filesystem.remove_empty_folder(location, storage_options)
        raise


def write_and_commit(
    df: DataFrame,
    location: str,
    fmt: str = "parquet",
    options: Mapping[str, str] | None = None,
    root: str | None = None,
    *,
    storage_options: StorageOptions = None,
    fence: Fence | None = None,
) -> CommittedOutput:
    """Write a Spark DataFrame to ``location`` with the commit protocol; refuse a committed location.

    With ``root``, the location must also lie inside that storage root. Spark is given the staging
    prefix as :func:`storage.locations.spark_uri` makes it (``file:///`` for local paths, ``s3a://``).
    """
    if root is not None:
        ensure_inside_root(root, location)

    def spark_write(staging: str) -> None:
        df.write.format(fmt).options(**dict(options or {})).mode("error").save(spark_uri(staging))

    return write_with(location, spark_write, fmt, storage_options=storage_options, fence=fence)
