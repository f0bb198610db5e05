"""Find the Java runtime that spark-submit will use and check that it is recent enough for Spark 4."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass

MINIMUM_JAVA = 17

SPARK_MODULE_OPTIONS = (
    "-XX:+IgnoreUnrecognizedVMOptions",
    "--add-modules=jdk.incubator.vector",
    *(
        f"--add-opens={module}/{package}=ALL-UNNAMED"
        for module, package in (
            ("java.base", "java.lang"),
            ("java.base", "java.lang.invoke"),
            ("java.base", "java.lang.reflect"),
            ("java.base", "java.io"),
            ("java.base", "java.net"),
            ("java.base", "java.nio"),
            ("java.base", "java.util"),
            ("java.base", "java.util.concurrent"),
            ("java.base", "java.util.concurrent.atomic"),
            ("java.base", "jdk.internal.ref"),
            ("java.base", "sun.nio.ch"),
            ("java.base", "sun.nio.cs"),
            ("java.base", "sun.security.action"),
            ("java.base", "sun.util.calendar"),
            ("java.security.jgss", "sun.security.krb5"),
        )
    ),
    "-Dio.netty.tryReflectionSetAccessible=true",
    "-Dio.netty.allocator.type=pooled",
    "-Dio.netty.handler.ssl.defaultEndpointVerificationAlgorithm=NONE",
)
"""What Spark 4.3's launcher gives the JVMs it starts (``org.apache.spark.launcher.JavaModuleOptions``;
a test reads them from the installed spark-launcher jar). A JVM started some other way needs them too: a
standalone worker starts a cluster-mode driver without them, and Hadoop's services need the same opens."""


def install_hint(minimum: int = MINIMUM_JAVA) -> str:
    """What to tell a user who lacks a recent enough Java."""
    return (
        f"install OpenJDK {minimum}: apt-get install openjdk-{minimum}-jre-headless, "
        f"or set JAVA_HOME to a Java {minimum}+ installation"
    )


# `java -version` prints e.g. `openjdk version "17.0.15" 2025-04-15`, `java version "1.8.0_392"`,
# or `openjdk version "21" 2023-09-19` (no minor part on .0 releases), always to stderr.
_VERSION_RE = re.compile(r'version\s+"(?P<version>(?P<first>\d+)(?:\.(?P<second>\d+))?[^"]*)"')


class SparkEnvironmentError(RuntimeError):
    """The machine lacks something spark-submit needs (Java, a Spark installation)."""


class JavaNotFoundError(SparkEnvironmentError):
    """No runnable java executable was found."""


class JavaVersionError(SparkEnvironmentError):
    """A java executable was found but is too old, or its version could not be read."""


@dataclass(frozen=True)
class JavaInfo:
    """The java executable spark-submit will run, and its version."""

    executable: str
    version: str
    major: int
    java_home: str | None


def parse_java_version(output: str) -> tuple[str, int]:
    """Return (version string, major version) from `java -version` output; ValueError if absent."""
    match = _VERSION_RE.search(output)
    if match is None:
        raise ValueError(f"no version in java -version output: {output.strip()[:200]!r}")
    first = int(match.group("first"))
    # Java 8 and older report "1.<major>.…"; 9+ report "<major>.…".
    if first == 1 and match.group("second") is not None:
        return match.group("version"), int(match.group("second"))
    return match.group("version"), first


def find_java(java_home: str | None = None, env: Mapping[str, str] | None = None) -> tuple[str, str | None]:
    """Return (java executable, JAVA_HOME used) the way Spark's `bin/spark-class` chooses it.

    spark-class uses `$JAVA_HOME/bin/java` whenever JAVA_HOME is set, even if it is broken, so a
    broken JAVA_HOME is an error here too rather than a silent fall back to PATH.
    """
    environ = os.environ if env is None else env
    home = java_home if java_home is not None else environ.get("JAVA_HOME") or None
    if home is not None:
        candidate = os.path.join(home, "bin", "java")
        if not (os.path.isfile(candidate) and os.access(candidate, os.X_OK)):
            raise JavaNotFoundError(
                f"JAVA_HOME={home} has no executable bin/java; Spark needs Java {MINIMUM_JAVA}+: {install_hint()}"
            )
        return candidate, home
    found = shutil.which("java", path=environ.get("PATH", os.defpath))
    if found is None:
        raise JavaNotFoundError(
            f"no java on PATH and JAVA_HOME is not set; Spark needs Java {MINIMUM_JAVA}+: {install_hint()}"
        )
    return found, None


def check_java(
    java_home: str | None = None,
    env: Mapping[str, str] | None = None,
    minimum: int = MINIMUM_JAVA,
    timeout_s: float = 30.0,
) -> JavaInfo:
    """Find java (JAVA_HOME, else PATH), run `java -version` and require at least `minimum`."""
    executable, home = find_java(java_home, env)
    try:
        completed = subprocess.run(
            [executable, "-version"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JavaNotFoundError(f"could not run {executable} -version ({exc}); {install_hint(minimum)}") from exc
    output = completed.stderr + completed.stdout
    try:
        version, major = parse_java_version(output)
    except ValueError as exc:
        raise JavaVersionError(
            f"{executable} -version exited with {completed.returncode} and printed no version "
            f"({output.strip()[:200]!r}); {install_hint(minimum)}"
        ) from exc
    if major < minimum:
        raise JavaVersionError(
            f"Spark needs Java {minimum} or newer, but {executable} is Java {major} "
            f"(version {version!r}); {install_hint(minimum)}"
        )
    return JavaInfo(executable=executable, version=version, major=major, java_home=home)
