"""What identifies a Python environment's content, cheaply enough to ask before every submission.

Every installed distribution's name, version and ``RECORD`` (the hash of each of its files, written by the
installer), the interpreter's version and platform, and the interpreter the archive's ``bin/python`` points
to. An editable install's ``RECORD`` lists only its hook, so its source files are hashed instead (the
provider's own package while it is developed).
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import sys
import sysconfig
from collections.abc import Iterable, Iterator
from importlib import metadata
from pathlib import Path

DIGEST_CHARS = 16
ARCHIVE_FORMAT = 2
"""Raised whenever ``pack.py`` packs differently: an archive of an earlier format is not reused."""


def editable_sources(dist: metadata.Distribution) -> list[Path]:
    """The folders (or single modules) an editable install of ``dist`` imports from; empty when not editable."""
    direct = dist.read_text("direct_url.json")
    try:
        editable = bool(direct and json.loads(direct).get("dir_info", {}).get("editable"))
    except ValueError:
        editable = False
    if not editable:
        return []
    import importlib.util

    found: list[Path] = []
    for name in (dist.read_text("top_level.txt") or "").split():
        spec = importlib.util.find_spec(name)
        if spec is None:
            continue
        if spec.submodule_search_locations:
            found.extend(Path(p) for p in spec.submodule_search_locations)
        elif spec.origin:
            found.append(Path(spec.origin))
    return found


def source_files(root: Path) -> Iterator[Path]:
    """The files under ``root`` that an archive carries (no ``__pycache__``), in a stable order."""
    if root.is_file():
        yield root
        return
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(files):
            yield Path(folder, name)


def _update(hasher: hashlib._Hash, *parts: str | bytes) -> None:
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else part
        hasher.update(len(data).to_bytes(8, "big") + data)


def digest_of(distributions: Iterable[metadata.Distribution], base_python: str) -> str:
    """The content digest of an environment made of ``distributions`` over the interpreter ``base_python``."""
    hasher = hashlib.sha256()
    _update(hasher, str(ARCHIVE_FORMAT), sys.version, platform.machine(), sys.platform, base_python)
    entries = []
    for dist in distributions:
        name = dist.metadata["Name"] or ""
        entries.append((name.lower(), dist.version or "", dist))
    for name, version, dist in sorted(entries, key=lambda e: (e[0], e[1])):
        _update(hasher, name, version, dist.read_text("RECORD") or "")
        for root in editable_sources(dist):
            for path in source_files(root):
                _update(hasher, str(path.relative_to(root.parent)), path.read_bytes())
    return hasher.hexdigest()[:DIGEST_CHARS]


def base_interpreter() -> str:
    """The real interpreter a virtual environment's ``bin/python`` runs (the archive keeps that link)."""
    return os.path.realpath(getattr(sys, "_base_executable", None) or sys.executable)


def site_packages() -> list[str]:
    """This environment's own site-packages folders (not the current folder, where a checkout's metadata lies)."""
    paths = sysconfig.get_paths()
    return sorted({paths["purelib"], paths["platlib"]})


def installed() -> list[metadata.Distribution]:
    """The distributions installed in this environment's site-packages."""
    return list(metadata.distributions(path=site_packages()))


@functools.cache
def environment_digest() -> str:
    """The digest of this interpreter's environment (see the module docstring)."""
    return digest_of(installed(), base_interpreter())
