"""Which Hadoop filesystem a scheme needs on Spark's classpath: a table of cases and the real pyspark jars."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

import pytest

from airflow_provider_finegrained.storage.classpath import (
    check_spark_filesystem,
    connector_jars,
    hadoop_version,
    missing_filesystem,
    s3a_jars,
    spark_jars,
)
from airflow_provider_finegrained.storage.errors import StorageConfigError

PYSPARK_JARS = ["hadoop-client-api-3.5.0.jar", "hadoop-client-runtime-3.5.0.jar", "parquet-hadoop-1.17.0.jar"]


@pytest.mark.parametrize(
    ("jars", "expected"),
    [
        (PYSPARK_JARS, "3.5.0"),
        (["/opt/spark/jars/hadoop-common-3.3.6.jar", "x.jar"], "3.3.6"),
        (["parquet-hadoop-1.17.0.jar", "hadoop-aws-3.5.0.jar"], None),
    ],
)
def test_hadoop_version(jars: list[str], expected: str | None) -> None:
    assert hadoop_version(jars) == expected


@pytest.mark.parametrize(
    ("scheme", "jars", "packages", "configured", "expected"),
    [
        # Bundled with pyspark's Hadoop client.
        ("file", PYSPARK_JARS, (), (), None),
        ("hdfs", PYSPARK_JARS, (), (), None),
        ("webhdfs", PYSPARK_JARS, (), (), None),
        ("viewfs", PYSPARK_JARS, (), (), None),
        # S3: the package and the version matching the bundled Hadoop.
        ("s3a", PYSPARK_JARS, (), (), "add --packages org.apache.hadoop:hadoop-aws:3.5.0 (spark.jars.packages"),
        ("s3", PYSPARK_JARS, (), (), "no filesystem for s3a:// (S3A (hadoop-aws))"),
        ("s3a", [*PYSPARK_JARS, "hadoop-aws-3.5.0.jar"], (), (), None),
        ("s3a", PYSPARK_JARS, ("org.apache.hadoop:hadoop-aws:3.5.0",), (), None),
        ("s3a", [*PYSPARK_JARS, "hadoop-aws-3.3.4.jar"], (), (), "hadoop-aws 3.3.4 does not match the Hadoop 3.5.0"),
        ("s3a", PYSPARK_JARS, ("org.apache.hadoop:hadoop-aws:3.4.1",), (), "use org.apache.hadoop:hadoop-aws:3.5.0"),
        ("s3a", ["x.jar"], (), (), "org.apache.hadoop:hadoop-aws:<the Hadoop version of your Spark>"),
        # Azure and GCS connectors.
        ("abfss", PYSPARK_JARS, (), (), "--packages org.apache.hadoop:hadoop-azure:3.5.0"),
        ("abfs", [*PYSPARK_JARS, "hadoop-azure-datalake-3.5.0.jar"], (), (), "hadoop-azure:3.5.0"),
        ("abfs", [*PYSPARK_JARS, "hadoop-azure-3.5.0.jar"], (), (), None),
        ("gs", PYSPARK_JARS, (), (), "com.google.cloud.bigdataoss:gcs-connector:<a release for Hadoop 3>"),
        ("gs", [*PYSPARK_JARS, "gcs-connector-hadoop3-latest.jar"], (), (), None),
        ("gs", [*PYSPARK_JARS, "gcs-connector-3.0.4-shaded.jar"], (), (), None),
        # What Spark cannot reach, or this provider does not know.
        ("memory", PYSPARK_JARS, (), (), "lives in one Python process only; Spark cannot read or write it"),
        ("oss", PYSPARK_JARS, (), (), "set spark.hadoop.fs.oss.impl in spark_conf"),
        ("oss", PYSPARK_JARS, (), ("oss",), None),
    ],
)
def test_missing_filesystem(
    scheme: str, jars: list[str], packages: tuple[str, ...], configured: tuple[str, ...], expected: str | None
) -> None:
    problem = missing_filesystem(scheme, jars, packages, configured)
    if expected is None:
        assert problem is None
    else:
        assert problem is not None and expected in problem


def test_the_installed_pyspark_lacks_s3a_and_says_which_package_to_add() -> None:
    spec = find_spec("pyspark")  # the pip package is a Spark home (what spark.submit.spark_home() finds)
    assert spec is not None and spec.submodule_search_locations
    home = spec.submodule_search_locations[0]
    jars = spark_jars(home)
    assert "hadoop-client-api-3.5.0.jar" in jars and hadoop_version(jars) == "3.5.0"
    check_spark_filesystem("/data/fg", home)
    check_spark_filesystem("hdfs://nn:8020/fg", home)
    with pytest.raises(StorageConfigError, match=r"storage_root 's3://bucket/fg': .*hadoop-aws:3\.5\.0"):
        check_spark_filesystem("s3://bucket/fg", home)
    # Given through spark_conf, the package (or an explicit filesystem class) satisfies the check.
    check_spark_filesystem("s3://bucket/fg", home, {"spark.jars.packages": "org.apache.hadoop:hadoop-aws:3.5.0"})
    check_spark_filesystem("s3a://bucket/fg", home, {"spark.jars": "/opt/jars/hadoop-aws-3.5.0.jar,/opt/b.jar"})
    check_spark_filesystem("oss://bucket/fg", home, {"spark.hadoop.fs.oss.impl": "com.example.OssFileSystem"})
    # On the class path of both the driver and the executors (what copies nothing to the workers' disks).
    both = "/opt/jars/hadoop-aws-3.5.0.jar:/opt/jars/bundle-2.35.4.jar"
    conf = {"spark.driver.extraClassPath": both, "spark.executor.extraClassPath": both}
    check_spark_filesystem("s3://bucket/fg", home, conf)
    with pytest.raises(StorageConfigError, match=r"spark\.driver\.extraClassPath and spark\.executor\.extraClassPath"):
        check_spark_filesystem("s3://bucket/fg", home, {"spark.driver.extraClassPath": both})  # executors lack it
    with pytest.raises(StorageConfigError, match="cannot list Spark's jars"):
        spark_jars("/nonexistent/spark")


def test_s3a_jars_resolves_hadoop_aws_at_the_given_hadoop_version(monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow_provider_finegrained.spark import maven

    asked: list[list[str]] = []

    def resolve(coordinates: list[str], **kwargs: object) -> list[str]:
        asked.append(list(coordinates))
        return ["/m2/hadoop-aws.jar"]

    monkeypatch.setattr(maven, "resolve_jars", resolve)
    assert s3a_jars("3.5.0") == ["/m2/hadoop-aws.jar"]
    assert connector_jars("s3", "3.4.1") == connector_jars("abfss", "3.5.0") == ["/m2/hadoop-aws.jar"]
    assert asked == [
        ["org.apache.hadoop:hadoop-aws:3.5.0"],
        ["org.apache.hadoop:hadoop-aws:3.4.1"],
        ["org.apache.hadoop:hadoop-azure:3.5.0"],
    ]
    for scheme in ("gs", "hdfs", "oss"):  # not versioned with Hadoop, bundled, unknown
        with pytest.raises(StorageConfigError, match=f"for {scheme}://"):
            connector_jars(scheme, "3.5.0")


def test_a_class_path_folder_counts_the_jars_in_it(tmp_path: Path) -> None:
    spec = find_spec("pyspark")
    assert spec is not None and spec.submodule_search_locations
    home = spec.submodule_search_locations[0]
    (tmp_path / "hadoop-aws-3.5.0.jar").write_bytes(b"")
    folder = f"{tmp_path}/*"
    check_spark_filesystem(
        "s3://bucket/fg", home, {"spark.driver.extraClassPath": folder, "spark.executor.extraClassPath": folder}
    )
