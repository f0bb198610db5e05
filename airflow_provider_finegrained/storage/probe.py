"""A real check that a storage root works: write, read back and delete a small object under it."""

from __future__ import annotations

import contextlib
import uuid

from airflow_provider_finegrained.storage import filesystem
from airflow_provider_finegrained.storage.errors import StorageConfigError, StorageError
from airflow_provider_finegrained.storage.filesystem import StorageOptions
from airflow_provider_finegrained.storage.locations import join, normalize_root, redact

PROBE_PREFIX = "_finegrained-probe-"


class StorageProbeError(StorageError):
    """The storage root could not be written, read or cleaned; the message names the root and the step."""


def _hint(exc: BaseException) -> str:
    if isinstance(exc, PermissionError):
        return " (the credentials may not write there, or the location is read-only)"
    if isinstance(exc, FileNotFoundError):
        return " (does the bucket or container exist?)"
    return ""


def probe(root: str, storage_options: StorageOptions = None) -> str:
    """Write, read back and delete a small object under ``root``; a one-line report, or StorageProbeError.

    A local root is created if missing, as a run would. The error names ``storage_root``, the root,
    the step that failed and why.
    """
    try:
        base = normalize_root(root)
    except StorageConfigError as exc:
        raise StorageProbeError(str(exc)) from exc
    shown = redact(base)
    token = uuid.uuid4().hex
    target = join(base, f"{PROBE_PREFIX}{token}")
    payload = f"airflow-provider-finegrained storage probe {token}\n".encode()
    step = "create the folder for"
    written = False
    try:
        filesystem.make_folder(base, storage_options)
        step = "write"
        filesystem.write_bytes(target, payload, storage_options)
        written = True
        step = "read back"
        data = filesystem.read_bytes(target, storage_options)
        if data != payload:
            raise StorageError(f"read {len(data)} bytes that differ from the {len(payload)} bytes written")
        step = "delete"
        filesystem.remove(target, storage_options)
        written = False
    except Exception as exc:
        if written:
            with contextlib.suppress(Exception):
                filesystem.remove(target, storage_options)
        raise StorageProbeError(
            f"storage_root {shown!r}: could not {step} a test object at {redact(target)}: "
            f"{type(exc).__name__}: {exc}{_hint(exc)}"
        ) from exc
    return f"storage_root {shown}: wrote, read back and deleted a {len(payload)}-byte test object"
