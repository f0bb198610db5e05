"""Jars from Maven Central, resolved with ``mvn`` once and cached outside any checkout.

Maven keeps the jars in its local repository (``~/.m2``); :func:`resolve_jars` caches the resolved
classpath per request (the coordinates, or a pom and its properties) under :func:`cache_root` and
resolves again when a jar it names is gone. Nothing here is ever written into the installed package.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from contextlib import suppress
from importlib.abc import Traversable
from xml.sax.saxutils import escape

CLASSPATH_FILE = "classpath.txt"


class MavenError(RuntimeError):
    """``mvn`` is missing or could not resolve the jars; the message says what to do."""


def cache_root() -> str:
    """``$XDG_CACHE_HOME/airflow-provider-finegrained`` (``~/.cache/...`` without it)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "airflow-provider-finegrained")


def _pom_for(coordinates: Sequence[str]) -> str:
    dependencies = []
    for coordinate in coordinates:
        parts = coordinate.strip().split(":")
        if len(parts) != 3 or not all(parts):
            raise MavenError(f"Maven coordinate {coordinate!r} is not group:artifact:version")
        group, artifact, version = (escape(part) for part in parts)
        dependencies.append(
            f"    <dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version></dependency>"
        )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<project xmlns="http://maven.apache.org/POM/4.0.0">\n'
        "  <modelVersion>4.0.0</modelVersion>\n"
        "  <groupId>airflow-provider-finegrained</groupId>\n  <artifactId>resolved-jars</artifactId>\n"
        "  <version>1</version>\n  <packaging>pom</packaging>\n"
        "  <dependencies>\n" + "\n".join(dependencies) + "\n  </dependencies>\n</project>\n"
    )


def _default_folder(coordinates: Sequence[str], properties: Mapping[str, str]) -> str:
    key = "\n".join([*coordinates, *(f"{k}={v}" for k, v in sorted(properties.items()))])
    # A readable name for people looking into the cache, a digest so that different requests never share it.
    readable = re.sub(r"[^A-Za-z0-9._-]+", "_", "+".join(c.split(":", 1)[-1] for c in coordinates))[:80]
    return os.path.join(cache_root(), "maven", f"{readable}-{hashlib.sha256(key.encode()).hexdigest()[:12]}")


def _cached(path: str) -> list[str] | None:
    with suppress(FileNotFoundError):
        with open(path, encoding="utf-8") as handle:
            jars = [jar for jar in handle.read().strip().split(os.pathsep) if jar]
        if jars and all(os.path.isfile(jar) for jar in jars):
            return jars
    return None


def resolve_jars(
    coordinates: Sequence[str] = (),
    *,
    pom: Traversable | None = None,
    properties: Mapping[str, str] | None = None,
    folder: str | None = None,
    what: str = "",
    timeout_s: float = 900.0,
) -> list[str]:
    """The jar paths (dependencies included) of ``coordinates`` (``group:artifact:version``), or of ``pom``.

    ``properties`` become ``-D`` options of ``mvn`` (a pom's ``${...}``). The classpath is cached in
    ``folder`` (by default one per coordinates and properties under :func:`cache_root`), where Maven's
    ``target/`` goes too. ``what`` names the jars in errors. MavenError when ``mvn`` is missing or fails.
    """
    if bool(coordinates) == (pom is not None):
        raise ValueError("give Maven coordinates or a pom, not both or neither")
    properties = dict(properties or {})
    what = what or ", ".join(coordinates) or "the pom's dependencies"
    folder = folder or _default_folder(coordinates, properties)
    cached = os.path.join(folder, CLASSPATH_FILE)
    jars = _cached(cached)
    if jars is not None:
        return jars
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenError(
            f"mvn (Apache Maven) is not on PATH; it fetches {what} from Maven Central: install it "
            "(apt-get install maven; scripts/bootstrap.sh does) and run again"
        )
    os.makedirs(folder, exist_ok=True)
    pom_file = os.path.join(folder, "pom.xml")
    if pom is not None:
        with open(pom_file, "wb") as handle:
            handle.write(pom.read_bytes())
    else:
        with open(pom_file, "w", encoding="utf-8") as handle:
            handle.write(_pom_for(coordinates))
    command = [mvn, "-q", "-B", "-f", pom_file, *(f"-D{k}={v}" for k, v in sorted(properties.items()))]
    command += ["dependency:build-classpath", f"-Dmdep.outputFile={cached}.tmp"]
    try:
        completed = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise MavenError(f"mvn did not resolve {what} within {timeout_s:.0f} s") from None
    if completed.returncode != 0:
        tail = "\n".join((completed.stdout + completed.stderr).strip().splitlines()[-15:])
        raise MavenError(f"mvn could not resolve {what}:\n{tail}")
    os.replace(f"{cached}.tmp", cached)
    jars = _cached(cached)
    if jars is None:
        raise MavenError(f"mvn resolved {what}, but {cached} names no jar that exists")
    return jars
