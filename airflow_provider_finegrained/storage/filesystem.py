"""Every filesystem call the provider makes on a storage location, through fsspec.

Storage options (credentials, endpoint, region...) are passed explicitly to each call; none means
fsspec's own defaults (for S3, the AWS credential chain). fsspec keeps one filesystem instance per
set of options, so repeated calls are cheap; listing caches are dropped before every listing because
Spark writes from another process.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator, Mapping
from typing import IO, Any

import fsspec
from fsspec import AbstractFileSystem
from fsspec.implementations.local import LocalFileSystem
from fsspec.implementations.memory import MemoryFileSystem

from airflow_provider_finegrained.storage.errors import StorageConfigError
from airflow_provider_finegrained.storage.hdfs import HDFS_SCHEMES, WebHdfsFileSystem, hdfs_filesystem
from airflow_provider_finegrained.storage.locations import basename, join, parent, redact

StorageOptions = Mapping[str, Any] | None
"""fsspec keyword arguments for a location's filesystem (e.g. s3fs's key, secret, endpoint_url)."""


def filesystem(location: str, storage_options: StorageOptions = None) -> tuple[AbstractFileSystem, str]:
    """The fsspec filesystem holding ``location`` and the path inside it."""
    if location.split("://", 1)[0].lower() in HDFS_SCHEMES and "://" in location:
        # Python reaches HDFS over WebHDFS (storage/hdfs.py), never through libhdfs.
        return hdfs_filesystem(location, dict(storage_options or {}))
    try:
        fs, path = fsspec.core.url_to_fs(location, **dict(storage_options or {}))
    except ImportError as exc:
        raise StorageConfigError(f"storage at {redact(location)} needs an fsspec driver: {exc}") from exc
    except ValueError as exc:
        raise StorageConfigError(f"storage at {redact(location)} is not reachable through fsspec: {exc}") from exc
    return fs, str(path).rstrip("/") or str(path)


def _fresh(fs: AbstractFileSystem, path: str) -> None:
    # Another process (Spark, another try) may have written since fsspec last listed this path.
    fs.invalidate_cache(path)


def _folders_are_real(fs: AbstractFileSystem) -> bool:
    """Whether empty folders exist on ``fs`` (on object stores they do not, and s3fs's makedirs of a
    bucket-level path would create a bucket)."""
    return isinstance(fs, LocalFileSystem | MemoryFileSystem) or bool({"hdfs", "webhdfs"} & set(_protocols(fs)))


def _protocols(fs: AbstractFileSystem) -> tuple[str, ...]:
    protocol = fs.protocol
    return (protocol,) if isinstance(protocol, str) else tuple(protocol)


def exists(location: str, storage_options: StorageOptions = None) -> bool:
    """Whether a file or a non-empty folder is at ``location``."""
    fs, path = filesystem(location, storage_options)
    _fresh(fs, path)
    return bool(fs.exists(path))


def read_bytes(location: str, storage_options: StorageOptions = None) -> bytes:
    """The content of the file at ``location``; FileNotFoundError if there is none."""
    fs, path = filesystem(location, storage_options)
    _fresh(fs, path)
    return bytes(fs.cat_file(path))


def write_bytes(location: str, data: bytes, storage_options: StorageOptions = None) -> None:
    """Replace the file at ``location`` so that a reader sees the old content or the new, never half.

    Locally the data goes to a temporary name beside it, then is renamed over it; on object stores a
    single put is atomic already.
    """
    fs, path = filesystem(location, storage_options)
    if isinstance(fs, LocalFileSystem):
        fs.makedirs(parent(path), exist_ok=True)
        tmp = f"{path}.tmp-{uuid.uuid4().hex}"
        try:
            fs.pipe_file(tmp, data)
            fs.mv(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                fs.rm_file(tmp)
        return
    fs.pipe_file(path, data)


def upload_file(local: str, location: str, storage_options: StorageOptions = None) -> None:
    """Copy the local file ``local`` to ``location``, streamed, so that a reader sees it whole or not at all.

    Where folders are real (local, HDFS) it goes to a temporary name beside it, then is renamed (unless the
    name appeared meanwhile: another writer's copy of the same content wins); an object appears only once
    its upload completes.
    """
    fs, path = filesystem(location, storage_options)
    if not _folders_are_real(fs):
        fs.put_file(local, path)
        return
    tmp = join(parent(path), f".{basename(path)}.tmp-{uuid.uuid4().hex}")
    try:
        fs.makedirs(parent(path), exist_ok=True)
        fs.put_file(local, tmp)
        _fresh(fs, path)
        if not fs.exists(path):
            fs.mv(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            if fs.exists(tmp):
                fs.rm_file(tmp)


def create_exclusive(location: str, data: bytes, storage_options: StorageOptions = None) -> None:
    """Create the file at ``location`` with ``data``, FileExistsError if it exists: one creator wins.

    Exclusive where the filesystem can be: locally a hard link from a complete temporary file (atomic,
    and a reader never sees a partial file; ``O_EXCL`` where hard links are not supported); on S3 a
    conditional put (``If-None-Match: *``, s3fs's ``mode="create"``; AWS S3 and compatible stores that
    honour it: a store that ignores the header silently lets the later put win); in fsspec's memory
    filesystem a create that fails on an existing file; on HDFS (over WebHDFS) a complete temporary file
    renamed without overwrite, which the NameNode refuses atomically when the name exists. Other drivers
    (gcsfs, adlfs) fall back to fsspec's check-then-write: two creators finishing within the same instant could
    both succeed, the later replacing the earlier; each writes complete content in one put, so a reader
    still sees one creator's content whole.
    """
    fs, path = filesystem(location, storage_options)
    if isinstance(fs, LocalFileSystem):
        fs.makedirs(parent(path), exist_ok=True)
        tmp = join(parent(path), f".{basename(path)}.tmp-{uuid.uuid4().hex}")
        try:
            fs.pipe_file(tmp, data)
            try:
                fs.link(tmp, path)  # os.link never replaces an existing file
            except FileExistsError:
                raise
            except OSError:
                # A filesystem without hard links (some network mounts): O_EXCL is still exclusive, but a
                # reader at that instant could see the file before its content is complete.
                with fs.open(path, "xb") as handle:
                    handle.write(data)
        finally:
            with contextlib.suppress(FileNotFoundError):
                fs.rm_file(tmp)
        return
    _fresh(fs, path)
    fs.pipe_file(path, data, mode="create")


def read_json(location: str, storage_options: StorageOptions = None) -> Any:
    """The JSON document at ``location``."""
    return json.loads(read_bytes(location, storage_options).decode("utf-8"))


def write_json(location: str, data: Any, storage_options: StorageOptions = None) -> None:
    """Write ``data`` as JSON at ``location``, replacing it atomically (see :func:`write_bytes`)."""
    write_bytes(location, json.dumps(data, indent=1, default=str).encode("utf-8"), storage_options)


@contextlib.contextmanager
def open_file(location: str, mode: str = "rb", storage_options: StorageOptions = None) -> Iterator[IO[bytes]]:
    """The file at ``location`` opened in binary ``mode`` (seekable for reads: parquet footers)."""
    fs, path = filesystem(location, storage_options)
    if isinstance(fs, LocalFileSystem) and mode[:1] in ("w", "x", "a"):
        fs.makedirs(parent(path), exist_ok=True)  # as object stores do: a file's folders need no creating
    with fs.open(path, mode) as handle:
        yield handle


def list_files(folder: str, storage_options: StorageOptions = None) -> dict[str, int]:
    """Every file under ``folder`` (recursively), as ``relative/name -> size``; empty if there is none."""
    fs, path = filesystem(folder, storage_options)
    _fresh(fs, path)
    if not fs.exists(path) or not fs.isdir(path):
        return {}
    prefix = path.rstrip("/") + "/"
    found = fs.find(path, detail=True)
    return {
        name[len(prefix) :]: int(info["size"])
        for name, info in found.items()
        if name.startswith(prefix) and info.get("type", "file") == "file"
    }


def list_folder(folder: str, storage_options: StorageOptions = None) -> list[tuple[str, bool]]:
    """The entries directly in ``folder`` as ``(name, is_folder)`` in name order; empty if it is missing."""
    fs, path = filesystem(folder, storage_options)
    _fresh(fs, path)
    try:
        entries = fs.ls(path, detail=True)
    except FileNotFoundError:
        return []
    prefix = path.rstrip("/") + "/"
    found = {
        str(entry["name"]).rstrip("/")[len(prefix) :]: entry["type"] == "directory"
        for entry in entries
        if str(entry["name"]).startswith(prefix)
    }
    return sorted((name, is_folder) for name, is_folder in found.items() if name and "/" not in name)


def make_folder(location: str, storage_options: StorageOptions = None) -> None:
    """Create the folder ``location`` where folders exist (local, HDFS, memory); nothing on object stores."""
    fs, path = filesystem(location, storage_options)
    if _folders_are_real(fs):
        fs.makedirs(path, exist_ok=True)


def remove(location: str, storage_options: StorageOptions = None) -> bool:
    """Remove the file or folder (recursively) at ``location``; whether there was anything to remove."""
    fs, path = filesystem(location, storage_options)
    _fresh(fs, path)
    if not fs.exists(path):
        return False
    fs.rm(path, recursive=True)
    _fresh(fs, path)
    return True


def remove_empty_folder(location: str, storage_options: StorageOptions = None) -> None:
    """Remove the folder ``location`` if it is empty (local, memory, HDFS); nothing otherwise (object stores have
    no empty folders)."""
    fs, path = filesystem(location, storage_options)
    if isinstance(fs, LocalFileSystem | MemoryFileSystem):  # their rmdir refuses a non-empty folder
        with contextlib.suppress(OSError):
            fs.rmdir(path)
    elif isinstance(fs, WebHdfsFileSystem):
        # A DELETE that is not recursive: the NameNode refuses a folder that is not empty.
        with contextlib.suppress(OSError, RuntimeError):
            fs.rm(path, recursive=False)


def reset_folder(location: str, storage_options: StorageOptions = None) -> None:
    """Make ``location`` an empty folder: whatever an earlier attempt left there is removed."""
    remove(location, storage_options)
    make_folder(location, storage_options)
