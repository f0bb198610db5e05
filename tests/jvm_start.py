"""Faster JVM start-up for the test suite's many short Spark applications.

Every test JVM (spark-submit drivers, executors, the standalone daemons, the warm pool's server, the
Hadoop containers) gets ``JAVA_TOOL_OPTIONS`` with:

- the provider's own class-data archive of Spark's classes (``spark.class_archive``, made once by
  ``python -m tests.jvm_start``, which ``scripts/test.sh`` runs), which the provider itself gives only the
  JVMs it starts that can map it;
- C1 only (``-XX:TieredStopAtLevel=1``): a test application lives seconds, so C2's compile threads cost
  more CPU than they give back. (Not the serial collector: with this archive it made Spark's standalone
  ``Client`` exit with its usage text before doing anything.)

On this 2-core machine a trivial ``spark-submit`` took 20.5 s wall / 32 s CPU without them and 10.5 s /
12 s with them (quiet machine, three runs each of ``/usr/bin/time spark-submit --master 'local[2]'
app.py`` with ``app.py`` a 1000-row group-by, without and with ``JAVA_TOOL_OPTIONS`` set as below).
They change how fast the JVM starts, not what Spark computes. A JVM whose class path differs from the
archive's (the launcher, a worker) ignores the archive silently (``-Xshare:auto``, its log off).
The benchmarks (``bench/``) do not use them: there the provider's own choices are what is measured.
"""

from __future__ import annotations

from pathlib import Path

from airflow_provider_finegrained.spark.class_archive import archive_path, build_archive

FAST_FLAGS = ("-XX:TieredStopAtLevel=1", "-Xshare:auto", "-Xlog:disable", "-Xlog:all=off")

__all__ = ["archive_path", "java_tool_options", "make_archive"]


def java_tool_options(archive: Path | None) -> str:
    flags = list(FAST_FLAGS)
    if archive is not None and archive.is_file():
        flags.insert(0, f"-XX:SharedArchiveFile={archive}")
    return " ".join(flags)


def make_archive() -> Path:
    """The provider's archive of this Spark and Java (about 50 s the first time); idempotent."""
    return build_archive()


if __name__ == "__main__":
    print(f"JAVA_TOOL_OPTIONS for tests: {java_tool_options(make_archive())}")
