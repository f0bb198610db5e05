"""Clean-up of a stage's folder: what failed, killed or superseded tries of the stage left there.

The layout it cleans is described in :mod:`runtime.output`.
"""

from __future__ import annotations

from airflow_provider_finegrained.runtime.output import (
    ATTEMPT_PREFIX,
    TMP_PREFIX,
    TRY_PREFIX,
    OutputCorruptError,
    OutputNotCommittedError,
    read_marker,
)
from airflow_provider_finegrained.storage import filesystem
from airflow_provider_finegrained.storage.filesystem import StorageOptions
from airflow_provider_finegrained.storage.locations import join


def _clean_try(folder: str, storage_options: StorageOptions) -> list[str]:
    """The attempts in one ``try=<n>`` folder that its marker does not name; all of it without a valid marker."""
    try:
        committed = read_marker(folder, storage_options)
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
