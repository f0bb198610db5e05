"""Pack this virtual environment into a ``.tar.gz`` that YARN unpacks in every container.

The layout is the environment's own (``pyvenv.cfg``, ``bin/python*``, ``lib/pythonX.Y/site-packages``), so
``./environment/bin/python`` in a container is this environment's Python, as with venv-pack: ``bin/python``
stays a link to the interpreter the environment was made from, which every node must have at the same path.
Left out: pyspark's jars (the JVM side comes from the cluster's Spark: ``spark.yarn.jars`` or the jars
spark-submit uploads), other scripts in ``bin/``, and the hooks of editable installs, whose source files
are packed in their place.
"""

from __future__ import annotations

import os
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path

from airflow_provider_finegrained.python_env.digest import editable_sources, installed, site_packages, source_files

SKIPPED_FOLDERS = (os.path.join("pyspark", "jars"),)
"""Relative to site-packages: what the containers never load from Python (462 MB for pyspark 4.3)."""
COMPRESS_LEVEL = 1
"""gzip's fastest: the archive is packed on the Airflow worker while a task waits, and read over a network."""


class PackError(RuntimeError):
    """This Python cannot be packed (not a virtual environment)."""


def _editable_hooks(dists: list[metadata.Distribution], site: Path) -> set[Path]:
    """The files through which editable installs import from their source folders (``.pth`` and finder)."""
    hooks: set[Path] = set()
    for dist in dists:
        if not editable_sources(dist):
            continue
        for file in dist.files or ():
            path = Path(os.path.normpath(site / str(file)))
            if path.parent == site and (path.suffix == ".pth" or path.name.startswith("__editable__")):
                hooks.add(path)
                # and the hook module's compiled form
                hooks.update((site / "__pycache__").glob(f"{path.stem}.*.pyc"))
    return hooks


def _walk(root: Path, skip: set[Path]) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        dirs[:] = sorted(d for d in dirs if here / d not in skip)
        for name in sorted(files):
            if here / name not in skip:
                yield here / name
        for name in dirs:
            if (here / name).is_symlink():
                yield here / name  # os.walk does not descend into it: the link itself is packed


def _members(prefix: Path) -> Iterator[tuple[Path, str]]:
    """(file on disk, name in the archive) for everything the archive holds."""
    yield prefix / "pyvenv.cfg", "pyvenv.cfg"
    for entry in sorted((prefix / "bin").iterdir()):
        if entry.name.startswith("python"):
            yield entry, f"bin/{entry.name}"
    if (prefix / "lib64").is_symlink():
        yield prefix / "lib64", "lib64"
    dists = installed()
    sites = sorted({Path(p) for p in site_packages()})
    for site in sites:
        skip = {site / folder for folder in SKIPPED_FOLDERS} | _editable_hooks(dists, site)
        for path in _walk(site, skip):
            yield path, path.relative_to(prefix).as_posix()
    target = sites[0].relative_to(prefix).as_posix()
    for dist in dists:
        for root in editable_sources(dist):
            for path in source_files(root):
                yield path, f"{target}/{path.relative_to(root.parent).as_posix()}"


def pack_environment(target: str | os.PathLike[str]) -> int:
    """Write this environment's archive to ``target`` (complete or not at all); returns its size in bytes."""
    prefix = Path(sys.prefix)
    if sys.prefix == sys.base_prefix or not (prefix / "pyvenv.cfg").is_file():
        raise PackError(
            f"{sys.executable} does not run in a virtual environment, so there is nothing to pack; run the "
            "Airflow worker from a venv, or set spark.archives and spark.pyspark.python yourself"
        )
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as raw, tarfile.open(fileobj=raw, mode="w:gz", compresslevel=COMPRESS_LEVEL) as tar:
            for path, name in _members(prefix):
                tar.add(path, arcname=name, recursive=False)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return target.stat().st_size
