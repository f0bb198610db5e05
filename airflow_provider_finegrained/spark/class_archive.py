"""A class-data archive of Spark's classes, one per Spark install and Java, kept outside any repository.

A JVM started with ``-XX:SharedArchiveFile`` maps the classes Spark loads at start (SQL, shuffle, parquet)
from the archive instead of reading, parsing and verifying them from Spark's jars again. The archive is
made once, by running a small application under ``-XX:ArchiveClassesAtExit`` (about 50 s on 2 cores), and
kept in ``$XDG_CACHE_HOME/airflow-provider-finegrained/class-archive`` (``~/.cache`` by default). Its
name is a digest of the Java runtime and of every jar of the Spark install (names, sizes, times), so a new
Java or Spark gets a new archive and an old one is never mapped against other jars.

The JVM accepts an archive only when its class path starts with the one the archive was made with
(``$SPARK_HOME/conf/:$SPARK_HOME/jars/*``): Spark's drivers and local-mode and standalone executors of
this install; not spark-submit's launcher (Spark's jars without ``conf/``) nor YARN's containers (Spark's
jars localised into each container's own folder). A JVM that cannot use it runs as before.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Iterator, Mapping
from pathlib import Path

from airflow_provider_finegrained.spark.java import find_java
from airflow_provider_finegrained.spark.submit import spark_home as resolve_spark_home
from airflow_provider_finegrained.spark.submit import spark_submit_path

CACHE_ENV = "FINEGRAINED_CLASS_ARCHIVE_DIR"
"""Where archives are kept, when set (else ``$XDG_CACHE_HOME`` or ``~/.cache``, then the provider's folder)."""

QUIET_OPTIONS = ("-Xshare:auto", "-Xlog:cds*=off")
"""With the archive: map it when the class path allows, else run without it, and say nothing either way (the
JVM's default warning goes to stdout, the driver's log)."""

# What a region's application loads: SQL, a shuffle, parquet written and read, a broadcast and a sort-merge join.
_WARM_UP = textwrap.dedent(
    """
    import sys
    from pyspark.sql import SparkSession, functions as F
    spark = SparkSession.builder.getOrCreate()
    out = sys.argv[1]
    df = spark.range(0, 20000, 1, 4).withColumn("k", F.col("id") % 7)
    df.groupBy("k").agg(F.sum("id").alias("s")).write.mode("overwrite").parquet(out + "/a")
    a = spark.read.parquet(out + "/a")
    df.join(F.broadcast(a), "k").groupBy("k").count().orderBy("k").collect()
    df.join(a, "k").repartition(3).write.mode("overwrite").parquet(out + "/b")
    spark.stop()
    """
)

# Made without these: Spark appends them to the class path (a longer class path at run time still matches),
# or they would put other flags into the JVM that makes the archive. SPARK_CONF_DIR, which comes first in the
# class path, is kept, and is part of the archive's name.
_CLASS_PATH_ENV = ("JAVA_TOOL_OPTIONS", "HADOOP_CONF_DIR", "YARN_CONF_DIR", "SPARK_DIST_CLASSPATH")


def cache_folder(env: Mapping[str, str] | None = None) -> Path:
    """The folder archives are kept in (not created)."""
    environ = os.environ if env is None else env
    if explicit := environ.get(CACHE_ENV):
        return Path(explicit)
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "airflow-provider-finegrained" / "class-archive"


def archive_path(spark_home: str | None = None, java_home: str | None = None, folder: Path | None = None) -> Path:
    """Where the archive of this Spark install and this Java lives (it may not exist yet)."""
    home = Path(resolve_spark_home(spark_home)).resolve()
    java = Path(find_java(java_home)[0]).resolve()
    digest = hashlib.sha256()
    conf = os.environ.get("SPARK_CONF_DIR", str(home / "conf"))
    for part in (_file_identity(java), _java_identity(java), str(home), conf, *_jar_identities(home)):
        digest.update(part.encode() + b"\0")
    return (folder or cache_folder()) / f"spark-{digest.hexdigest()[:20]}.jsa"


def existing_archive(spark_home: str | None = None, java_home: str | None = None) -> Path | None:
    """The archive of this Spark and Java if it has been made, else None."""
    path = archive_path(spark_home, java_home)
    return path if path.is_file() else None


def build_archive(spark_home: str | None = None, java_home: str | None = None, output: Path | None = None) -> Path:
    """Make the archive (about 50 s); return its path. Idempotent, and safe to run from several processes:
    one makes it under a lock, the others wait and find it; a half-made archive is never at the path."""
    target = output or archive_path(spark_home, java_home)
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with _locked(target):
        if not target.is_file():
            _dump(target, spark_home, java_home)
    return target


def build_in_background(spark_home: str | None = None, java_home: str | None = None) -> None:
    """Start making the archive in a process of its own that outlives this one, unless one is at it already.

    Its output goes to ``<archive>.log`` beside the archive; a failure leaves ``<archive>.failed`` with the
    reason, and no region tries again until ``finegrained class-archive`` (or this module) is run by hand.
    """
    target = archive_path(spark_home, java_home)
    # Once per install: a build that failed (its reason in <archive>.failed) is not tried again by every region.
    if target.is_file() or target.with_suffix(".failed").exists() or _is_locked(target):
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "airflow_provider_finegrained.spark.class_archive", "--output", str(target)]
    command += [
        *(["--spark-home", spark_home] if spark_home else []),
        *(["--java-home", java_home] if java_home else []),
    ]
    with open(target.with_suffix(".log"), "ab") as log:
        subprocess.Popen(
            command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True, env=_plain_env()
        )


def _dump(target: Path, spark_home: str | None, java_home: str | None) -> None:
    env = _plain_env() | {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    env["SPARK_HOME"] = resolve_spark_home(spark_home)
    if java_home:
        env["JAVA_HOME"] = java_home
    with tempfile.TemporaryDirectory(prefix="class-archive-") as work:
        script = Path(work) / "warm_up.py"
        script.write_text(_WARM_UP)
        partial = target.with_name(f"{target.stem}.{os.getpid()}.partial")
        try:
            subprocess.run(
                [
                    spark_submit_path(spark_home),
                    *("--master", "local[2]", "--conf", "spark.ui.enabled=false"),
                    *("--driver-java-options", f"-XX:ArchiveClassesAtExit={partial} -Xlog:cds*=off"),
                    str(script),
                    str(Path(work) / "out"),
                ],
                check=True,
                capture_output=True,
                env=env,
                timeout=900,
            )
            partial.replace(target)  # atomic: a JVM never maps half an archive
        finally:
            partial.unlink(missing_ok=True)


@contextlib.contextmanager
def _locked(target: Path) -> Iterator[None]:
    with open(target.with_suffix(".lock"), "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _is_locked(target: Path) -> bool:
    lock = target.with_suffix(".lock")
    if not lock.exists():
        return False
    with open(lock, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def _plain_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in _CLASS_PATH_ENV}


def _file_identity(path: Path) -> str:
    stat = path.stat()
    return f"{path}:{stat.st_size}:{stat.st_mtime_ns}"


def _java_identity(java: Path) -> str:
    # The JVM itself (libjvm.so) changes with a Java update even where the java launcher does not.
    runtime = java.parent.parent
    return ";".join(_file_identity(p) for p in sorted(runtime.glob("lib/server/libjvm.*")))


def _jar_identities(home: Path) -> list[str]:
    return [_file_identity(jar) for jar in sorted((home / "jars").glob("*.jar"))]


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Make the class-data archive of a Spark install and a Java.")
    parser.add_argument("--spark-home")
    parser.add_argument("--java-home")
    parser.add_argument("--output", type=Path, help="where to write it (default: the provider's cache folder)")
    args = parser.parse_args(argv)
    target = args.output or archive_path(args.spark_home, args.java_home)
    failed = target.with_suffix(".failed")
    failed.unlink(missing_ok=True)
    try:
        print(build_archive(args.spark_home, args.java_home, target))
    except (OSError, subprocess.SubprocessError) as exc:
        stderr = getattr(exc, "stderr", b"") or b""
        failed.parent.mkdir(parents=True, exist_ok=True)
        failed.write_text(f"{exc}\n{stderr.decode(errors='replace')[-4000:]}")
        print(f"could not make the class-data archive {target}: {exc} (details in {failed})", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
