"""The output protocol of a stage: where it writes, how it commits, how readers find it, on any filesystem.

Layout under a storage root (a local path or any fsspec URL: ``s3://``, ``hdfs://``, ``gs://``...)::

    <root>/<dag_id>/<run_id>/<stage_id>/try=<n>/_COMMITTED            the marker: the only thing readers trust
    <root>/<dag_id>/<run_id>/<stage_id>/try=<n>/attempt-<id>/part-*   data files of the attempt the marker names
    <root>/<dag_id>/<run_id>/<stage_id>/try=<n>/attempt-<other>/...   a failed or late attempt: ignored, cleaned

Each attempt to write a location gets its own staging prefix inside it, and Spark writes there. The
commit lists what the attempt wrote (sizes from one listing, rows from the parquet/orc footers) and
then creates ONE marker object, last, naming every data file with its size, the rows and the format.
Nothing is renamed, so the protocol holds on object stores. The marker is created exclusively
(:func:`storage.filesystem.create_exclusive`: a conditional put on S3, a hard link locally), so of two
attempts committing one location exactly one wins; the other gets OutputAlreadyExistsError. Readers
read the marker and use exactly the files it lists (:attr:`CommittedOutput.uris`), never a folder
listing that could include a straggler's files.

Fencing (:mod:`runtime.fence`): a write may carry its try's :class:`Fence`. A newer try raises the
stage's fence before it cleans up, and from then on the older try can neither start a write, nor
publish, nor leave a marker a reader accepts: the commit checks the token before creating the marker
and again after (removing its own marker if it lost), the marker records its token, and readers refuse
a marker whose token is no longer the fence's current one. Clean-up removes such superseded tries.

Names starting with ``_`` or ``.`` are not data (Spark's ``_SUCCESS``, Hadoop's ``.crc`` files). A
plain folder read of ``try=<n>`` finds the data with pyarrow (which descends into folders) when only
one attempt ran; Spark does not descend into the non-partition ``attempt-*`` folder unless given
``recursiveFileLookup=true``: give it :attr:`CommittedOutput.uris` instead. Markers of protocol 1
(data at the top of the location, published by a folder rename) are still read.

Runs in the operator and inside the Spark driver; pyspark and pyarrow are imported lazily.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_finegrained.runtime.fence import Fence, rebased_fence
from airflow_provider_finegrained.storage import filesystem
from airflow_provider_finegrained.storage.filesystem import StorageOptions
from airflow_provider_finegrained.storage.locations import (
    ensure_inside_root,
    join,
    normalize_root,
    output_location,
    relative_to,
    sanitize_component,
    spark_uri,
    stage_folder,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = [
    "ATTEMPT_PREFIX",
    "MARKER",
    "PROTOCOL_VERSION",
    "READABLE_PROTOCOLS",
    "SUPPORTED_FORMATS",
    "TMP_PREFIX",
    "CommittedOutput",
    "Fence",
    "FencedError",
    "OutputAlreadyExistsError",
    "OutputCorruptError",
    "OutputError",
    "OutputNotCommittedError",
    "begin_output",
    "cleanup_uncommitted",
    "commit_output",
    "count_rows",
    "data_files",
    "ensure_inside_root",
    "local_root",
    "output_location",
    "read_committed",
    "sanitize_component",
    "stage_folder",
    "write_and_commit",
    "write_with",
]

MARKER = "_COMMITTED"
ATTEMPT_PREFIX = "attempt-"
TMP_PREFIX = ".tmp-"
"""Protocol 1's staging folders beside the outputs; :func:`cleanup_uncommitted` still removes them."""
PROTOCOL_VERSION = 2
READABLE_PROTOCOLS = (1, 2)
SUPPORTED_FORMATS = ("parquet", "orc")
TRY_PREFIX = "try="

_PART_NUMBER = re.compile(r"part-(\d+)")


class OutputError(RuntimeError):
    """Base class of the output protocol's errors."""


class OutputNotCommittedError(OutputError):
    """A location has no `_COMMITTED` marker: its stage never finished writing it."""


class OutputAlreadyExistsError(OutputError):
    """A location is already committed; a second writer must not replace it."""


class OutputCorruptError(OutputError):
    """A committed output's marker is unreadable or does not match the files in storage."""


class FencedError(OutputError):
    """A newer try of the stage revoked this try's token: it must not write or publish anything."""


@dataclass(frozen=True)
class CommittedOutput:
    """A committed stage output, as recorded in its `_COMMITTED` marker."""

    path: str
    format: str
    partition_bytes: list[int] = field(default_factory=list)
    rows: int = 0
    files: list[str] = field(default_factory=list)
    """Data files relative to ``path``, in part order."""
    attempt: str = ""
    """The attempt's folder (relative to ``path``) holding the files; empty for protocol 1 outputs."""
    fence: Fence | None = None
    """The fencing token the commit held; None for outputs written without one."""

    @property
    def total_bytes(self) -> int:
        """Sum of the part files' sizes: the stage's exact output bytes."""
        return sum(self.partition_bytes)

    @property
    def uris(self) -> list[str]:
        """The full location of every data file: exactly what a reader must read."""
        return [join(self.path, name) for name in self.files]

    @property
    def data_root(self) -> str:
        """The folder the data files were written under (Spark's ``basePath`` for partition columns)."""
        return join(self.path, self.attempt) if self.attempt else self.path

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, also the body of the marker."""
        return {
            "protocol": PROTOCOL_VERSION,
            "path": self.path,
            "format": self.format,
            "rows": self.rows,
            "total_bytes": self.total_bytes,
            "partition_bytes": list(self.partition_bytes),
            "files": list(self.files),
            "attempt": self.attempt,
        } | ({"fence": self.fence.to_dict()} if self.fence else {})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CommittedOutput:
        """Inverse of `to_dict`; raises ValueError on a malformed record."""
        try:
            output = cls(
                path=str(data["path"]),
                format=str(data["format"]),
                partition_bytes=[int(size) for size in data["partition_bytes"]],
                rows=int(data["rows"]),
                files=[str(name) for name in data["files"]],
                attempt=str(data.get("attempt", "")),
                fence=Fence.from_dict(data.get("fence")),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed committed output record: {exc!r}") from exc
        if len(output.files) != len(output.partition_bytes):
            raise ValueError("committed output record has different numbers of files and sizes")
        if any(name.startswith("/") or ".." in name.split("/") for name in output.files):
            raise ValueError("committed output record names a file outside its location")
        return output


def local_root(root: str) -> str:
    """The canonical form of a storage root: a local path (``file:`` URLs too) or any fsspec URL.

    Kept under its old name; it no longer refuses non-local roots (see ``storage.locations.normalize_root``).
    """
    return normalize_root(root)


def _check_format(fmt: str) -> None:
    if fmt not in SUPPORTED_FORMATS:
        raise ValueError(f"unsupported output format {fmt!r}; supported: {', '.join(SUPPORTED_FORMATS)}")


def _hidden(relative: str) -> bool:
    return any(part.startswith(("_", ".")) for part in relative.split("/"))


def _part_sort_key(relative: str) -> tuple[str, int, str]:
    folder, _, name = relative.rpartition("/")
    match = _PART_NUMBER.match(name)
    return folder, int(match.group(1)) if match else -1, name


# ---------------------------------------------------------------- writing


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
            _read_marker(location, storage_options)
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
            if _read_marker(location, storage_options, check_fence=False).attempt == output.attempt:
                filesystem.remove(marker, storage_options)
        raise


def _superseded_marker(location: str, storage_options: StorageOptions) -> bool:
    try:
        _read_marker(location, storage_options)
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


# ---------------------------------------------------------------- reading and cleaning


def _read_marker(location: str, storage_options: StorageOptions, *, check_fence: bool = True) -> CommittedOutput:
    marker = join(location, MARKER)
    try:
        raw = filesystem.read_bytes(marker, storage_options)
    except FileNotFoundError:
        if filesystem.exists(location, storage_options):
            reason = "the folder exists but has no _COMMITTED marker (it was not written by this protocol)"
        else:
            reason = "it does not exist (the stage has not finished, or failed before publishing)"
        raise OutputNotCommittedError(f"no committed output at {location}: {reason}") from None
    try:
        record = json.loads(raw.decode("utf-8"))
        if not isinstance(record, dict):
            raise ValueError(f"a JSON {type(record).__name__}, not an object")
        protocol = record.get("protocol")
        if protocol not in READABLE_PROTOCOLS:
            raise ValueError(
                f"protocol {protocol!r}, this provider reads {list(READABLE_PROTOCOLS)} (written by a newer one?)"
            )
        output = CommittedOutput.from_dict(record)
    except ValueError as exc:
        raise OutputCorruptError(f"unreadable marker {marker}: {exc}") from exc
    # The location may have moved with its root since it was committed; where it is now is what counts.
    fence = rebased_fence(output.fence, output.path, location) if output.fence else None
    if check_fence and fence is not None:
        newer = fence.superseded_by(storage_options)
        if newer is not None:
            raise OutputNotCommittedError(
                f"no committed output at {location}: its marker was written by try {fence.token}, which try "
                f"{newer} of the stage superseded (a late writer's marker is never read)"
            )
    return CommittedOutput(
        location, output.format, output.partition_bytes, output.rows, output.files, output.attempt, fence
    )


def read_committed(location: str, verify: bool = True, *, storage_options: StorageOptions = None) -> CommittedOutput:
    """Return the committed output at ``location``; OutputNotCommittedError if there is none.

    With ``verify``, every file the marker lists must exist with its recorded size (one listing).
    Read exactly :attr:`CommittedOutput.uris`: other files under the location are not part of it.
    """
    output = _read_marker(location, storage_options)
    if verify:
        found = filesystem.list_files(output.data_root, storage_options)
        for name, size in zip(output.files, output.partition_bytes, strict=True):
            actual = found.get(relative_to(output.data_root, join(output.path, name)))
            if actual != size:
                raise OutputCorruptError(
                    f"committed output {location}: {name} should have {size} bytes, found "
                    f"{'no such file' if actual is None else actual}"
                )
    return output


def _clean_try(folder: str, storage_options: StorageOptions) -> list[str]:
    """The attempts in one ``try=<n>`` folder that its marker does not name; all of it without a valid marker."""
    try:
        committed = _read_marker(folder, storage_options)
    except OutputNotCommittedError:  # no marker, or a superseded try's
        return [folder] if filesystem.remove(folder, storage_options) else []
    except OutputCorruptError:
        return []  # not sure what is committed: keep everything for a person to look at
    removed = []
    for name, is_folder in filesystem.list_folder(folder, storage_options):
        if is_folder and name.startswith(ATTEMPT_PREFIX) and name != committed.attempt:
            path = join(folder, name)
            filesystem.remove(path, storage_options)
            removed.append(path)
    return removed


def cleanup_uncommitted(stage_dir: str, *, storage_options: StorageOptions = None) -> list[str]:
    """Remove what failed, killed or late tries left in a stage folder; returns the removed locations.

    Removed: ``try=<n>`` folders without a marker or with a superseded try's marker, attempts a marker
    does not name, and protocol 1 staging folders (``.tmp-*``). Call it after raising the stage's fence
    (a revoked try may still be writing: it can no longer publish, and what it writes later is removed
    by the next clean-up), or when no try of the stage is writing.
    """
    removed: list[str] = []
    for name, is_folder in filesystem.list_folder(stage_dir, storage_options):
        path = join(stage_dir, name)
        if not is_folder:
            continue
        if name.startswith(TMP_PREFIX):
            filesystem.remove(path, storage_options)
            removed.append(path)
        elif name.startswith(TRY_PREFIX):
            removed += _clean_try(path, storage_options)
    return removed
