"""Faster JVM start-up for the test suite's many short Spark applications.

Every test JVM (spark-submit drivers, executors, the standalone daemons, the warm pool's server) gets
``JAVA_TOOL_OPTIONS`` with:

- a class-data-sharing archive of Spark's classes (AppCDS, made once by ``python -m tests.jvm_start``,
  which ``scripts/test.sh`` runs): the classes are mapped, not parsed and verified again;
- C1 only (``-XX:TieredStopAtLevel=1``): a test application lives seconds, so C2's compile threads cost
  more CPU than they give back. (Not the serial collector: with this archive it made Spark's standalone
  ``Client`` exit with its usage text before doing anything.)

On this 2-core machine a trivial ``spark-submit`` took 20.5 s wall / 32 s CPU without them and 10.5 s /
12 s with them (quiet machine, three runs each of ``/usr/bin/time spark-submit --master 'local[2]'
app.py`` with ``app.py`` a 1000-row group-by, without and with ``JAVA_TOOL_OPTIONS`` set as below).
They change how fast the JVM starts, not what Spark computes. A JVM whose class path differs from the
archive's (the launcher, a worker) ignores the archive silently (``-Xshare:auto``).
The benchmarks (``bench/``) do not use them.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from airflow_provider_finegrained.spark.submit import spark_home, spark_submit_path

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".cache" / "spark-cds"
FAST_FLAGS = ("-XX:TieredStopAtLevel=1", "-Xshare:auto", "-Xlog:disable", "-Xlog:all=off")

# Loads what the tests' applications load: SQL, shuffles, parquet write and read, a join.
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


def archive_path() -> Path:
    """Where the archive for this Java and this pyspark install lives (one per combination)."""
    java = subprocess.run(["java", "-version"], capture_output=True, text=True, env=_plain_env()).stderr
    key = hashlib.sha256(f"{java}|{spark_home()}|{sys.version}".encode()).hexdigest()[:16]
    return CACHE / f"spark-{key}.jsa"


def java_tool_options(archive: Path | None) -> str:
    flags = list(FAST_FLAGS)
    if archive is not None and archive.is_file():
        flags.insert(0, f"-XX:SharedArchiveFile={archive}")
    return " ".join(flags)


def _plain_env() -> dict[str, str]:
    env = os.environ.copy()
    env.pop("JAVA_TOOL_OPTIONS", None)
    return env


def make_archive() -> Path:
    """Run a small application once with ``-XX:ArchiveClassesAtExit`` (about 50 s); idempotent."""
    target = archive_path()
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="spark-cds-") as work:
        script = Path(work) / "warm_up.py"
        script.write_text(_WARM_UP)
        partial = target.with_suffix(f".{os.getpid()}.tmp")
        env = _plain_env() | {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
        subprocess.run(
            [
                spark_submit_path(),
                "--master",
                "local[2]",
                "--conf",
                "spark.ui.enabled=false",
                "--driver-java-options",
                f"-XX:ArchiveClassesAtExit={partial} -Xlog:disable -Xlog:all=off",
                str(script),
                str(Path(work) / "out"),
            ],
            check=True,
            capture_output=True,
            env=env,
            timeout=600,
        )
        partial.replace(target)  # atomic: a concurrent run never maps half an archive
    return target


if __name__ == "__main__":
    print(f"JAVA_TOOL_OPTIONS for tests: {java_tool_options(make_archive())}")
