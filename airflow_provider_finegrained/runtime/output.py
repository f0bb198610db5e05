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

This module holds the marker's record, the protocol's errors and the reader; writing and committing
are in :mod:`runtime.output_commit`, clean-up of failed and superseded tries in
:mod:`runtime.output_cleanup`. Runs in the operator and inside the Spark driver; pyspark and pyarrow
are imported lazily.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

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
    stage_folder,
)

__all__ = [
    "ATTEMPT_PREFIX",
    "MARKER",
    "PROTOCOL_VERSION",
    "READABLE_PROTOCOLS",
    "SUPPORTED_FORMATS",
    "TMP_PREFIX",
    "TRY_PREFIX",
    "CommittedOutput",
    "Fence",
    "FencedError",
    "OutputAlreadyExistsError",
    "OutputCorruptError",
    "OutputError",
    "OutputNotCommittedError",
    "ensure_inside_root",
    "local_root",
    "output_location",
    "read_committed",
    "read_marker",
    "sanitize_component",
    "stage_folder",
]

MARKER = "_COMMITTED"
ATTEMPT_PREFIX = "attempt-"
TMP_PREFIX = ".tmp-"
"""Protocol 1's staging folders beside the outputs; ``output_cleanup.cleanup_uncommitted`` still removes them."""
PROTOCOL_VERSION = 2
READABLE_PROTOCOLS = (1, 2)
SUPPORTED_FORMATS = ("parquet", "orc")
TRY_PREFIX = "try="


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


def read_marker(location: str, storage_options: StorageOptions, *, check_fence: bool = True) -> CommittedOutput:
    """The committed output the marker at ``location`` records, without checking its files.

    OutputNotCommittedError without a marker or (with ``check_fence``) with a superseded try's marker;
    OutputCorruptError if the marker cannot be read.
    """
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
    output = read_marker(location, storage_options)
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
