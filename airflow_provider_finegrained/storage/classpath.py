"""Which Hadoop filesystem a storage scheme needs on Spark's side, checked before any work runs.

pyspark bundles Hadoop's client (``hadoop-client-api-<version>.jar``): file, HDFS, WebHDFS, viewfs,
HAR and FTP, but no cloud connectors. A root on ``s3a://`` without ``hadoop-aws`` would fail deep
inside the first Spark write ("No FileSystem for scheme"); :func:`missing_filesystem` says so up front,
naming the package and the version that matches the bundled Hadoop; :func:`connector_jars` fetches
that package's jars (with ``mvn``, once) for ``spark.jars``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from airflow_provider_finegrained.storage.errors import StorageConfigError
from airflow_provider_finegrained.storage.locations import redact, scheme_of, spark_uri

BUNDLED_SCHEMES = frozenset({"file", "hdfs", "webhdfs", "swebhdfs", "viewfs", "har", "ftp"})
"""Filesystems in the Hadoop client that pyspark bundles."""

_HADOOP_JAR = re.compile(r"^hadoop-(?:client-api|common)-(\d+\.\d+\.\d+[^/]*?)\.jar$")


@dataclass(frozen=True)
class Connector:
    """The jar that gives Hadoop (and so Spark) one family of filesystems."""

    name: str
    artifact: str
    """The jar's artifact id: ``<artifact>-<version>.jar`` in a jars folder."""
    coordinate: str
    """Maven coordinate to add; ``{hadoop}`` stands for the bundled Hadoop's version."""
    versioned_with_hadoop: bool
    note: str = ""


_S3A = Connector(
    "S3A (hadoop-aws)",
    "hadoop-aws",
    "org.apache.hadoop:hadoop-aws:{hadoop}",
    True,
    "(it brings the AWS SDK bundle it needs with --packages; with jars, add that bundle too)",
)
_AZURE = Connector("ABFS (hadoop-azure)", "hadoop-azure", "org.apache.hadoop:hadoop-azure:{hadoop}", True)
_GCS = Connector(
    "the Cloud Storage connector",
    "gcs-connector",
    "com.google.cloud.bigdataoss:gcs-connector:<a release for Hadoop 3>",
    False,
    "(its shaded jar, which carries its own dependencies)",
)
CONNECTORS: Mapping[str, Connector] = {
    "s3a": _S3A,
    "abfs": _AZURE,
    "abfss": _AZURE,
    "wasb": _AZURE,
    "wasbs": _AZURE,
    "gs": _GCS,
}
"""Schemes (as Spark is given them, see ``spark_uri``) whose filesystem is not bundled."""


def hadoop_version(jars: Iterable[str]) -> str | None:
    """The Hadoop version of a Spark classpath, from ``hadoop-client-api-<v>.jar`` (or ``hadoop-common``)."""
    versions = sorted({m.group(1) for name in jars if (m := _HADOOP_JAR.match(os.path.basename(name)))})
    return versions[-1] if versions else None


def _jar_version(jars: Iterable[str], connector: Connector) -> str | None:
    """The version of ``connector``'s jar among ``jars`` ("" if its name has none to compare), None if absent."""
    pattern = re.compile(rf"^{re.escape(connector.artifact)}-(.+)\.jar$")
    for name in jars:
        match = pattern.match(os.path.basename(name))
        if match is None:
            continue
        version = match.group(1)
        if version[:1].isdigit():
            return version
        if not connector.versioned_with_hadoop:  # gcs-connector-hadoop3-latest.jar
            return ""
        # otherwise another artifact sharing the prefix: hadoop-azure-datalake-3.5.0.jar
    return None


def _package_version(packages: Iterable[str], connector: Connector) -> str | None:
    group, artifact = connector.coordinate.split(":")[:2]
    for package in packages:
        parts = package.strip().split(":")
        if len(parts) >= 2 and parts[0] == group and parts[1] == artifact:
            return parts[2] if len(parts) >= 3 else ""
    return None


def missing_filesystem(
    scheme: str, jars: Iterable[str], packages: Iterable[str] = (), configured: Iterable[str] = ()
) -> str | None:
    """Why Spark cannot use ``scheme`` with this classpath, or None when it can.

    ``jars``: jar file names on Spark's classpath (its jars folder and ``spark.jars``); ``packages``:
    ``spark.jars.packages`` coordinates; ``configured``: schemes given an explicit
    ``spark.hadoop.fs.<scheme>.impl``, trusted as they are.
    """
    scheme = scheme.lower()
    spark_scheme = "s3a" if scheme in ("s3", "s3n") else scheme
    if spark_scheme in BUNDLED_SCHEMES or spark_scheme in set(configured):
        return None
    if spark_scheme == "memory":
        return "memory:// lives in one Python process only; Spark cannot read or write it (use it for tests)"
    jars = list(jars)
    packages = list(packages)
    connector = CONNECTORS.get(spark_scheme)
    if connector is None:
        return (
            f"Spark has no Hadoop filesystem for {spark_scheme}:// known to this provider; add its connector "
            f"jar and set spark.hadoop.fs.{spark_scheme}.impl in spark_conf"
        )
    hadoop = hadoop_version(jars)
    wanted = connector.coordinate.format(hadoop=hadoop or "<the Hadoop version of your Spark>")
    have = _jar_version(jars, connector)
    if have is None:
        have = _package_version(packages, connector)
    if have is None:
        return (
            f"Spark's classpath has no filesystem for {spark_scheme}:// ({connector.name}); add "
            f"--packages {wanted} (spark.jars.packages in spark_conf), put its jar into SPARK_HOME/jars, or name it "
            "in both spark.driver.extraClassPath and spark.executor.extraClassPath"
            + (f" {connector.note}" if connector.note else "")
        )
    if connector.versioned_with_hadoop and have and hadoop and have != hadoop:
        return (
            f"{connector.artifact} {have} does not match the Hadoop {hadoop} that Spark bundles (mixing versions "
            f"fails at run time with NoSuchMethodError); use {wanted}"
        )
    return None


def spark_jars(spark_home: str) -> list[str]:
    """The jar file names in ``<spark_home>/jars``, sorted; StorageConfigError if there is no such folder."""
    folder = os.path.join(spark_home, "jars")
    try:
        return sorted(name for name in os.listdir(folder) if name.endswith(".jar"))
    except OSError as exc:
        raise StorageConfigError(f"cannot list Spark's jars in {folder}: {exc}") from exc


def _class_path_jars(class_path: str) -> set[str]:
    """The jar file names a JVM class path names: ``dir/x.jar`` entries, and the jars of ``dir/*`` entries."""
    found: set[str] = set()
    for entry in class_path.split(os.pathsep):
        entry = entry.strip()
        if entry.endswith(".jar"):
            found.add(os.path.basename(entry))
        elif entry.endswith("*") and os.path.isdir(entry.rstrip("*")):
            found.update(name for name in os.listdir(entry.rstrip("*")) if name.endswith(".jar"))
    return found


def check_spark_filesystem(location: str, spark_home: str, spark_conf: Mapping[str, str] | None = None) -> None:
    """Fail before any work when the Spark at ``spark_home`` (with ``spark_conf``) cannot reach ``location``.

    The error names ``storage_root``, the location, and the package and version to add.
    """
    conf = dict(spark_conf or {})
    scheme = scheme_of(spark_uri(location))
    jars = spark_jars(spark_home) + [os.path.basename(j) for j in conf.get("spark.jars", "").split(",") if j.strip()]
    # A jar on the extra class path counts where both the driver and the executors have it (nothing is copied).
    driver, executor = (
        _class_path_jars(conf.get(f"spark.{side}.extraClassPath", "")) for side in ("driver", "executor")
    )
    jars += sorted(driver & executor)
    packages = [p for p in conf.get("spark.jars.packages", "").split(",") if p.strip()]
    configured = [
        key.removeprefix("spark.hadoop.fs.").removesuffix(".impl")
        for key in conf
        if key.startswith("spark.hadoop.fs.") and key.endswith(".impl") and key.count(".") == 4
    ]
    problem = missing_filesystem(scheme, jars, packages, configured)
    if problem is not None:
        raise StorageConfigError(f"storage_root {redact(location)!r}: {problem}")


def connector_jars(scheme: str, hadoop: str, timeout_s: float = 900.0) -> list[str]:
    """The jars (the connector and its dependencies) that give Spark ``scheme`` at Hadoop version ``hadoop``.

    Resolved from Maven Central with ``mvn`` once and cached (:mod:`spark.maven`); for ``spark.jars``
    where spark-submit cannot resolve ``spark.jars.packages`` itself, or should not at every submit.
    StorageConfigError for a scheme whose connector is bundled, unknown or not versioned with Hadoop;
    MavenError when ``mvn`` is missing or fails.
    """
    from airflow_provider_finegrained.spark.maven import resolve_jars

    scheme = scheme.lower()
    connector = CONNECTORS.get("s3a" if scheme in ("s3", "s3n") else scheme)
    if connector is None or not connector.versioned_with_hadoop:
        raise StorageConfigError(f"no Maven coordinate versioned with Hadoop is known for {scheme}://")
    coordinate = connector.coordinate.format(hadoop=hadoop)
    return resolve_jars([coordinate], what=f"{connector.name} {coordinate}", timeout_s=timeout_s)


def s3a_jars(hadoop: str, timeout_s: float = 900.0) -> list[str]:
    """hadoop-aws at Hadoop version ``hadoop`` and its dependencies (the AWS SDK bundle...), for ``spark.jars``."""
    return connector_jars("s3a", hadoop, timeout_s)
