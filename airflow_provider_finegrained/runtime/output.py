"""The atomic output protocol of a stage: where it writes, how it publishes, how readers find it.

Layout under a storage root::

    <root>/<dag_id>/<run_id>/<stage_id>/try=<n>/             published output of try n
    <root>/<dag_id>/<run_id>/<stage_id>/try=<n>/_COMMITTED   marker: files, sizes, rows, format
    <root>/<dag_id>/<run_id>/<stage_id>/.tmp-try=<n>-<uuid>/ staging while the write runs

The data and the marker are written into the staging folder, which is then renamed to `try=<n>`:
one atomic rename publishes everything, so a reader sees either nothing or a complete, committed
output. A rename onto an existing non-empty folder fails, so two writers of one location cannot
both publish. Names starting with `_` or `.` are hidden from Spark's readers, as Hadoop hides them.

Runs in the operator and inside the Spark driver; pyspark and pyarrow are imported lazily.
Local filesystem only for now; each step is a small function so an fsspec version can follow.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

MARKER = "_COMMITTED"
TMP_PREFIX = ".tmp-"
PROTOCOL_VERSION = 1
SUPPORTED_FORMATS = ("parquet", "orc")

_UNSAFE_CHARS = re.compile(r"[^A-Za-z0-9._-]")
_MAX_COMPONENT = 200
_PART_NUMBER = re.compile(r"part-(\d+)")


class OutputError(RuntimeError):
    """Base class of the output protocol's errors."""


class OutputNotCommittedError(OutputError):
    """A location has no `_COMMITTED` marker: its stage never finished writing it."""


class OutputAlreadyExistsError(OutputError):
    """A location is already published; a second writer must not replace it."""


class OutputCorruptError(OutputError):
    """A committed output's marker is unreadable or does not match the files on disk."""


@dataclass(frozen=True)
class CommittedOutput:
    """A published stage output, as recorded in its `_COMMITTED` marker."""

    path: str
    format: str
    partition_bytes: list[int] = field(default_factory=list)
    rows: int = 0
    files: list[str] = field(default_factory=list)

    @property
    def total_bytes(self) -> int:
        """Sum of the part files' sizes: the stage's exact output bytes."""
        return sum(self.partition_bytes)

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
        }

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
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"malformed committed output record: {exc!r}") from exc
        if len(output.files) != len(output.partition_bytes):
            raise ValueError("committed output record has different numbers of files and sizes")
        return output


# ---------------------------------------------------------------- locations


def sanitize_component(value: str, what: str = "path component") -> str:
    """Return `value` made safe as one folder name; ValueError for traversal or absolute values.

    Characters other than letters, digits, `.`, `_` and `-` become `_` (a run id's `:` and `+` are
    troublesome in Hadoop paths); a short hash of the original is then appended so that two values
    differing only in such characters still get different folders.
    """
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string, got {value!r}")
    if value in (".", "..") or "/" in value or "\\" in value or "\x00" in value:
        raise ValueError(f"{what} {value!r} must not be '.', '..' or contain path separators")
    safe = _UNSAFE_CHARS.sub("_", value)
    if safe != value or len(safe) > _MAX_COMPONENT:
        digest = hashlib.sha256(value.encode()).hexdigest()[:8]
        safe = f"{safe[:_MAX_COMPONENT]}-{digest}"
    return safe


def local_root(root: str) -> str:
    """Return the absolute local folder of a storage root given as a path or a `file:` URL."""
    path = root
    if path.startswith("file://"):
        path = path.removeprefix("file://")
    elif path.startswith("file:"):
        path = path.removeprefix("file:")
    elif "://" in path:
        raise ValueError(f"storage root {root!r}: only local paths and file:// URLs are supported for now")
    if not os.path.isabs(path):
        raise ValueError(f"storage root {root!r} must be an absolute path")
    return os.path.normpath(path)


def ensure_inside_root(root: str, path: str) -> str:
    """Return `path` resolved (symlinks too); ValueError if it is not inside `root`.

    A relative `path` is taken relative to the root.
    """
    real_root = os.path.realpath(local_root(root))
    real_path = os.path.realpath(os.path.join(real_root, path))
    if os.path.commonpath([real_root, real_path]) != real_root:
        raise ValueError(f"path {path!r} escapes the storage root {root!r}")
    return real_path


def stage_folder(root: str, dag_id: str, run_id: str, stage_id: str) -> str:
    """Return `<root>/<dag_id>/<run_id>/<stage_id>` with each component sanitized."""
    parts = (
        sanitize_component(dag_id, "dag_id"),
        sanitize_component(run_id, "run_id"),
        sanitize_component(stage_id, "stage_id"),
    )
    return ensure_inside_root(root, os.path.join(*parts))


def output_location(root: str, dag_id: str, run_id: str, stage_id: str, try_number: int) -> str:
    """Return the folder where try `try_number` of a stage publishes its output."""
    if isinstance(try_number, bool) or not isinstance(try_number, int) or try_number < 0:
        raise ValueError(f"try_number must be a non-negative int, got {try_number!r}")
    return os.path.join(stage_folder(root, dag_id, run_id, stage_id), f"try={try_number}")


# ---------------------------------------------------------------- writing


def _fsync_dir(path: str) -> None:
    # Makes a rename durable; some filesystems refuse to open folders, which only costs durability.
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def begin_output(location: str) -> str:
    """Check that `location` is free and return a fresh staging path beside it (not created)."""
    final = os.path.abspath(location)
    if os.path.lexists(final):
        raise OutputAlreadyExistsError(f"output {final} already exists; refusing to write it again")
    parent, name = os.path.split(final)
    os.makedirs(parent, exist_ok=True)
    return os.path.join(parent, f"{TMP_PREFIX}{name}-{uuid.uuid4().hex}")


def _part_sort_key(relative: str) -> tuple[str, int, str]:
    folder, name = os.path.split(relative)
    match = _PART_NUMBER.match(name)
    return folder, int(match.group(1)) if match else -1, name


def data_files(folder: str) -> list[str]:
    """Relative paths of the data files under `folder` in part order, skipping hidden `_`/`.` names."""
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if not d.startswith(("_", "."))]
        found += [
            os.path.relpath(os.path.join(dirpath, name), folder)
            for name in filenames
            if not name.startswith(("_", "."))
        ]
    return sorted(found, key=_part_sort_key)


def count_rows(paths: list[str], fmt: str) -> int:
    """Rows in the given files, from their footers only (no data is read)."""
    try:
        if fmt == "parquet":
            import pyarrow.parquet as pq  # type: ignore[import-untyped, unused-ignore]

            return sum(int(pq.read_metadata(path).num_rows) for path in paths)
        if fmt == "orc":
            import pyarrow.orc as orc  # type: ignore[import-untyped, unused-ignore]

            return sum(int(orc.ORCFile(path).nrows) for path in paths)
    except ImportError as exc:
        raise OutputError("counting output rows needs pyarrow: pip install pyarrow") from exc
    raise ValueError(f"unsupported output format {fmt!r}; supported: {', '.join(SUPPORTED_FORMATS)}")


def _write_marker(folder: str, output: CommittedOutput) -> None:
    record = output.to_dict() | {"committed_at": datetime.now(UTC).isoformat()}
    tmp = os.path.join(folder, f".{MARKER}.tmp-{uuid.uuid4().hex}")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    os.rename(tmp, os.path.join(folder, MARKER))


def _publish(staging: str, final: str) -> None:
    # os.rename would silently replace an *empty* folder, so look first; a non-empty one (another
    # writer that won the race) makes the rename itself fail.
    if os.path.lexists(final):
        raise OutputAlreadyExistsError(f"output {final} was published by another writer meanwhile")
    try:
        os.rename(staging, final)
    except OSError as exc:
        if os.path.lexists(final):
            raise OutputAlreadyExistsError(f"output {final} was published by another writer meanwhile") from exc
        raise
    _fsync_dir(os.path.dirname(final))


def commit_output(staging: str, location: str, fmt: str = "parquet") -> CommittedOutput:
    """Measure the files written to `staging`, add the marker, and publish it as `location`."""
    if fmt not in SUPPORTED_FORMATS:
        raise ValueError(f"unsupported output format {fmt!r}; supported: {', '.join(SUPPORTED_FORMATS)}")
    final = os.path.abspath(location)
    files = data_files(staging)
    if not files:
        raise OutputError(f"no data files were written to {staging}; nothing to commit for {final}")
    paths = [os.path.join(staging, name) for name in files]
    output = CommittedOutput(
        path=final,
        format=fmt,
        partition_bytes=[os.path.getsize(path) for path in paths],
        rows=count_rows(paths, fmt),
        files=files,
    )
    _write_marker(staging, output)
    _publish(staging, final)
    return output


def write_with(location: str, write: Callable[[str], None], fmt: str = "parquet") -> CommittedOutput:
    """Run `write(staging_path)`, then commit; the staging folder is removed if anything fails."""
    if fmt not in SUPPORTED_FORMATS:
        raise ValueError(f"unsupported output format {fmt!r}; supported: {', '.join(SUPPORTED_FORMATS)}")
    staging = begin_output(location)
    try:
        write(staging)
        return commit_output(staging, location, fmt)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def write_and_commit(
    df: DataFrame,
    location: str,
    fmt: str = "parquet",
    options: Mapping[str, str] | None = None,
    root: str | None = None,
) -> CommittedOutput:
    """Write a Spark DataFrame to `location` with the atomic protocol; refuse an existing location.

    With `root`, the location must also lie inside that storage root.
    """
    if root is not None:
        ensure_inside_root(root, location)

    def spark_write(staging: str) -> None:
        # An explicit file:// URI keeps a cluster's default filesystem (HDFS, S3) out of a local write.
        df.write.format(fmt).options(**dict(options or {})).mode("error").save("file://" + staging)

    return write_with(location, spark_write, fmt)


# ---------------------------------------------------------------- reading and cleaning


def read_committed(location: str, verify: bool = True) -> CommittedOutput:
    """Return the committed output at `location`; OutputNotCommittedError if there is none.

    With `verify`, every recorded file must exist with its recorded size.
    """
    final = os.path.abspath(location)
    marker = os.path.join(final, MARKER)
    if not os.path.isfile(marker):
        if os.path.isdir(final):
            reason = "the folder exists but has no _COMMITTED marker (it was not written by this protocol)"
        else:
            reason = "it does not exist (the stage has not finished, or failed before publishing)"
        raise OutputNotCommittedError(f"no committed output at {final}: {reason}")
    try:
        with open(marker, encoding="utf-8") as handle:
            output = CommittedOutput.from_dict(json.load(handle))
    except (OSError, ValueError) as exc:
        raise OutputCorruptError(f"unreadable marker {marker}: {exc}") from exc
    # The folder may have moved with its root since it was committed; where it is now is what counts.
    output = CommittedOutput(final, output.format, output.partition_bytes, output.rows, output.files)
    if verify:
        for name, size in zip(output.files, output.partition_bytes, strict=True):
            path = os.path.join(final, name)
            actual = os.path.getsize(path) if os.path.isfile(path) else None
            if actual != size:
                raise OutputCorruptError(f"committed output {final}: {name} should have {size} bytes, found {actual}")
    return output


def cleanup_uncommitted(stage_dir: str) -> list[str]:
    """Remove the staging folders (`.tmp-*`) that failed or killed tries left in a stage folder.

    Call it only when no try of the stage is writing. Returns the removed paths.
    """
    if not os.path.isdir(stage_dir):
        return []
    removed = []
    for entry in sorted(os.scandir(stage_dir), key=lambda e: e.name):
        if entry.name.startswith(TMP_PREFIX) and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
            removed.append(entry.path)
    return removed
