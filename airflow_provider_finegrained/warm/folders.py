"""Where warm pools live: one folder per Airflow worker host and master, under the storage root or $TMPDIR."""

from __future__ import annotations

import os
import socket
import tempfile
from pathlib import Path
from typing import Any

from airflow_provider_finegrained.storage.locations import plain_name

WARM_FOLDER = "_warm"


def auto_folder(settings: Any) -> str:
    """``<storage_root>/_warm/<host>/<master>``: every task on this host finds the same pool there.

    A pool is one per Airflow worker host: it listens on the host's loopback only, and its folder holds
    pids, locks and a Unix socket that mean nothing on another host. ``<host>`` keeps the hosts of a
    local root that several of them mount (NFS) apart. A remote storage_root (hdfs://, s3://...) cannot
    hold them at all: the folder is then ``$TMPDIR/finegrained-<uid>/_warm/<master>``, on the host's own
    disk. Its data stays on the root.
    """
    if settings.storage_is_local:
        root = os.path.join(
            settings.storage_root.removeprefix("file://"), WARM_FOLDER, plain_name(socket.gethostname())
        )
    else:
        root = os.path.join(tempfile.gettempdir(), f"finegrained-{os.getuid()}", WARM_FOLDER)
    return os.path.abspath(os.path.join(root, plain_name(settings.master)))


def pool_folders(warm_root: str | os.PathLike[str]) -> list[str]:
    """The folders pools may live in under a local ``<root>/_warm``: ``<host>/<master>`` (:func:`auto_folder`), and
    ``<master>``, where a provider before per-host folders put them. Sorted; empty when there is no such folder."""
    root = Path(warm_root)
    return sorted(str(p) for p in [*root.glob("*"), *root.glob("*/*")] if p.is_dir())
