"""The Spark settings that run a region's Python from the shipped environment: a table of cases."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from airflow_provider_finegrained.python_env.ship import (
    archive_location,
    needs_python_env,
    prune_cache,
    python_env_conf,
)

ARCHIVE = "hdfs://nn:8020/root/_python/0123456789abcdef.tar.gz"
SHIPPED = f"{ARCHIVE}#environment"
ARCHIVES = "spark.yarn.dist.archives"
"""Not spark.archives: with it a client-mode driver unpacks the archive on the Airflow worker too."""
WORKER = "/opt/airflow/venv/bin/python"


@pytest.mark.parametrize(
    ("conf", "deploy_mode", "expected"),
    [
        # Cluster mode: the driver runs in the ApplicationMaster's container, from the archive too.
        ({}, "cluster", {ARCHIVES: SHIPPED, "spark.pyspark.python": "./environment/bin/python"}),
        # Client mode: the driver runs on the Airflow worker, with the worker's Python.
        (
            {},
            "client",
            {
                ARCHIVES: SHIPPED,
                "spark.pyspark.python": "./environment/bin/python",
                "spark.pyspark.driver.python": WORKER,
            },
        ),
        # A user's own archives are kept, the environment added after them in YARN's list (spark-submit adds
        # the user's spark.archives to that list).
        (
            {"spark.archives": "hdfs:///data/a.zip#a", ARCHIVES: "hdfs:///data/dict.zip#dict"},
            "cluster",
            {
                "spark.archives": "hdfs:///data/a.zip#a",
                ARCHIVES: f"hdfs:///data/dict.zip#dict,{SHIPPED}",
                "spark.pyspark.python": "./environment/bin/python",
            },
        ),
        # A user who chose a Python keeps it, and nothing is shipped.
        ({"spark.pyspark.python": "/opt/py/bin/python"}, "cluster", {"spark.pyspark.python": "/opt/py/bin/python"}),
        (
            {"spark.pyspark.driver.python": "/usr/bin/python3", "spark.archives": "a.zip#a"},
            "client",
            {"spark.pyspark.driver.python": "/usr/bin/python3", "spark.archives": "a.zip#a"},
        ),
        # An empty value is no choice.
        (
            {"spark.pyspark.python": ""},
            "cluster",
            {ARCHIVES: SHIPPED, "spark.pyspark.python": "./environment/bin/python"},
        ),
    ],
)
def test_python_env_conf(conf: dict[str, str], deploy_mode: str, expected: dict[str, str]) -> None:
    assert python_env_conf(conf, ARCHIVE, deploy_mode, WORKER) == expected
    assert needs_python_env(conf) == (expected.get("spark.pyspark.python") == "./environment/bin/python")


@pytest.mark.parametrize(
    ("archive", "shipped"),
    [
        ("/srv/root/_python/d.tar.gz", "file:///srv/root/_python/d.tar.gz#environment"),  # a shared mount
        ("s3://bucket/root/_python/d.tar.gz", "s3a://bucket/root/_python/d.tar.gz#environment"),  # Hadoop's S3
    ],
)
def test_the_archive_is_named_as_spark_reads_it(archive: str, shipped: str) -> None:
    assert python_env_conf({}, archive, "cluster", WORKER)[ARCHIVES] == shipped


@pytest.mark.parametrize(
    ("root", "expected"),
    [
        ("hdfs://nn:8020/airflow", "hdfs://nn:8020/airflow/_python/abc.tar.gz"),
        ("s3://bucket/", "s3://bucket/_python/abc.tar.gz"),
        ("/srv/root", "/srv/root/_python/abc.tar.gz"),
    ],
)
def test_archive_location(root: str, expected: str) -> None:
    assert archive_location(root, "abc") == expected


def test_the_cache_keeps_the_newest_archives(tmp_path: Path) -> None:
    for age, digest in enumerate(["newest", "older", "oldest"]):
        archive = tmp_path / f"{digest}.tar.gz"
        archive.write_bytes(b"packed")
        (tmp_path / f"{digest}.lock").touch()
        os.utime(archive, (1_000_000 - age * 100, 1_000_000 - age * 100))
    removed = prune_cache(tmp_path, keep=2)
    assert removed == [tmp_path / "oldest.tar.gz"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["newest.lock", "newest.tar.gz", "older.lock", "older.tar.gz"]
