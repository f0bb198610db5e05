"""Where a packed environment is kept and the Spark settings that run a region's Python from it.

The archive is packed once per content digest into this machine's cache, then copied once to
``<storage_root>/_python/<digest>.tar.gz``, where YARN localizes it from (once per NodeManager: the
NodeManager keeps localized files for later applications of the same user).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from airflow_provider_finegrained.python_env.digest import environment_digest
from airflow_provider_finegrained.python_env.pack import pack_environment
from airflow_provider_finegrained.storage import filesystem
from airflow_provider_finegrained.storage.filesystem import StorageOptions
from airflow_provider_finegrained.storage.locations import join, redact, spark_uri

ARCHIVE_FOLDER = "_python"
LINK = "environment"
"""The folder the archive is unpacked into, in every container's working folder."""
PYTHON = f"./{LINK}/bin/python"
ARCHIVES_KEY = "spark.yarn.dist.archives"
"""YARN's own list of archives for every container (the driver's does not unpack it on the Airflow worker)."""
CACHED_ARCHIVES = 2
"""Archives kept in this machine's cache: the environment in use and the one before it."""
PYTHON_ENV_KEYS = ("spark.pyspark.python", "spark.pyspark.driver.python")
"""A user who sets either has chosen the Python: nothing is packed or shipped then."""

log = logging.getLogger(__name__)
_shipped: set[str] = set()
"""Archive locations this process has seen complete: later regions do not ask the storage again."""


def needs_python_env(conf: Mapping[str, str]) -> bool:
    """Whether an application with ``conf`` gets the packed environment (the user chose no Python)."""
    return not any(conf.get(key) for key in PYTHON_ENV_KEYS)


def python_env_conf(conf: Mapping[str, str], archive: str, deploy_mode: str, driver_python: str) -> dict[str, str]:
    """``conf`` with ``archive`` unpacked as ``./environment`` in every container and its Python used there.

    The archive goes to ``spark.yarn.dist.archives``, which YARN localizes in every container (after a user's
    own there; spark-submit adds a user's ``spark.archives`` to the same list). Not ``spark.archives``: with
    it, a client-mode driver also downloads and unpacks the whole archive on the Airflow worker, for a Python
    it never runs. In client mode the driver runs on the Airflow worker, so its Python stays
    ``driver_python``. Unchanged when the user chose a Python.
    """
    if not needs_python_env(conf):
        return dict(conf)
    archives = [a for a in conf.get(ARCHIVES_KEY, "").split(",") if a.strip()]
    merged = {
        **conf,
        ARCHIVES_KEY: ",".join([*archives, f"{spark_uri(archive)}#{LINK}"]),
        "spark.pyspark.python": PYTHON,
    }
    if deploy_mode == "client":
        merged["spark.pyspark.driver.python"] = driver_python
    return merged


def prune_cache(cache: Path, keep: int) -> list[Path]:
    """Remove all but the ``keep`` newest archives from ``cache`` (each environment's is hundreds of MB)."""
    archives = sorted(cache.glob("*.tar.gz"), key=lambda p: p.stat().st_mtime, reverse=True)
    for old in archives[keep:]:
        old.unlink(missing_ok=True)
        old.with_suffix("").with_suffix(".lock").unlink(missing_ok=True)
    return archives[keep:]


def archive_location(storage_root: str, digest: str) -> str:
    return join(storage_root, ARCHIVE_FOLDER, f"{digest}.tar.gz")


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One packer per digest on this machine: a second waits and then finds the archive made."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ship_environment(storage_root: str, storage_options: StorageOptions, cache: str) -> str:
    """The location of this environment's archive under ``storage_root``, packed and copied there if missing.

    ``cache``: this machine's folder for packed archives. Raises :class:`~.pack.PackError` when this Python is
    not a virtual environment, and the storage's errors when the root cannot be written.
    """
    digest = environment_digest()
    location = archive_location(storage_root, digest)
    if location in _shipped:
        return location
    if not filesystem.exists(location, storage_options):
        local = Path(cache) / f"{digest}.tar.gz"
        with _locked(Path(cache) / f"{digest}.lock"):
            if not local.exists():
                began = time.monotonic()
                size = pack_environment(local)
                prune_cache(Path(cache), keep=CACHED_ARCHIVES)
                log.info(
                    "Packed the Python environment %s (%s) in %.1f s: %.0f MB",
                    digest,
                    sys.prefix,
                    time.monotonic() - began,
                    size / 2**20,
                )
        began = time.monotonic()
        filesystem.upload_file(str(local), location, storage_options)
        log.info("Copied the Python environment %s to %s in %.1f s", digest, redact(location), time.monotonic() - began)
    _shipped.add(location)
    return location


def cache_folder() -> str:
    """This machine's folder for packed environments (beside the provider's other caches)."""
    from airflow_provider_finegrained.spark.maven import cache_root

    return os.path.join(cache_root(), "python-env")
