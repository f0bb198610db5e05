"""The output protocol's public names, locally, and with Spark itself on a ``file://`` storage root.

The protocol's Python side runs on local, memory:// and S3 storage in tests/storage; here Spark writes
and reads through it (one local SparkSession for the module).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from airflow_provider_finegrained.runtime.fence import Fence
from airflow_provider_finegrained.runtime.job import InputRef
from airflow_provider_finegrained.runtime.output import (
    ATTEMPT_PREFIX,
    MARKER,
    FencedError,
    OutputAlreadyExistsError,
    local_root,
    output_location,
    read_committed,
    sanitize_component,
    stage_folder,
)
from airflow_provider_finegrained.runtime.output_commit import write_and_commit
from airflow_provider_finegrained.runtime.region_loop import Sessions, _load_input, storage_options
from airflow_provider_finegrained.storage.locations import join, spark_uri

# ---------------------------------------------------------------- locations


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("my_dag", "my_dag"),
        ("group.stage-1", "group.stage-1"),
        ("...", "..."),
    ],
)
def test_safe_components_are_kept(value: str, expected: str) -> None:
    assert sanitize_component(value) == expected


@pytest.mark.security
def test_unsafe_characters_are_replaced_and_disambiguated() -> None:
    run_a = sanitize_component("manual__2026-11-22T01:02:03+00:00")
    run_b = sanitize_component("manual__2026-11-22T01_02_03_00_00")
    assert run_a.startswith("manual__2026-11-22T01_02_03_00_00-")
    assert run_b == "manual__2026-11-22T01_02_03_00_00"
    assert run_a != run_b
    assert sanitize_component("manual__2026-11-22T01:02:03+00:00") == run_a  # deterministic
    assert sanitize_component("a b=c").startswith("a_b_c-")


def test_long_components_are_shortened() -> None:
    long = "x" * 300
    safe = sanitize_component(long)
    assert len(safe) <= 210
    assert safe != sanitize_component("x" * 301)


@pytest.mark.parametrize("value", ["", ".", "..", "/etc", "a/b", "../x", "a\\b", "a\x00b"])
@pytest.mark.security
def test_traversal_and_absolute_components_are_rejected(value: str) -> None:
    with pytest.raises(ValueError, match="stage_id"):
        sanitize_component(value, "stage_id")


def test_local_roots_give_plain_paths(tmp_path: Path) -> None:
    root = str(tmp_path)
    location = output_location(root, "etl", "manual__1", "clean.orders", 2)
    assert location == os.path.join(root, "etl", "manual__1", "clean.orders", "try=2")
    assert stage_folder(root, "etl", "manual__1", "clean.orders") == os.path.dirname(location)
    assert output_location("file://" + root, "etl", "manual__1", "clean.orders", 2) == location
    assert spark_uri(location) == "file://" + location


@pytest.mark.parametrize(
    ("root", "expected"),
    [("s3://bucket/root/", "s3://bucket/root"), ("hdfs://nn/x", "hdfs://nn/x"), ("file:///data", "/data")],
)
def test_local_root_no_longer_refuses_urls(root: str, expected: str) -> None:
    assert local_root(root) == expected


def test_local_root_still_refuses_relative_paths() -> None:
    with pytest.raises(ValueError, match="storage_root 'relative/root' must be an absolute path"):
        local_root("relative/root")


def test_runtime_api_outside_the_provider_says_how_it_is_meant_to_run() -> None:
    from airflow_provider_finegrained.runtime.api import StageContextError, current_stage

    with pytest.raises(StageContextError, match=r"only available when the provider runs this file as a stage"):
        current_stage()


# ---------------------------------------------------------------- with Spark


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("output-protocol-test")
        # No spark.ui.enabled=false: the first session's settings become the JVM's system properties, which
        # every later session of this test process inherits (test_progress needs its UI).
        .config("spark.sql.shuffle.partitions", "2")
        # What a connection's storage credentials become (storage.hadoop_conf): read back by the driver side.
        .config("spark.hadoop.fs.s3a.access.key", "AKIA-TEST")
        .config("spark.hadoop.fs.s3a.endpoint", "http://127.0.0.1:9")
        .getOrCreate()
    )
    try:
        yield session
    finally:
        session.stop()


@pytest.mark.slow
def test_spark_writes_commits_and_reads_exactly_the_listed_files(spark: Any, tmp_path: Path) -> None:
    root = f"file://{tmp_path}/storage"
    location = output_location(root, "dag", "manual__2026-11-22T01:02:03+00:00", "stage", 1)
    assert location.startswith(f"{tmp_path}/storage/")  # a plain path in XCom, file:// for Spark

    df = spark.range(0, 1000, numPartitions=3).selectExpr("id", "id % 5 AS k")
    committed = write_and_commit(df, location, root=root)
    assert committed.rows == 1000 and len(committed.files) == 3 and committed.path == location
    assert all(name.startswith(f"{committed.attempt}/part-") for name in committed.files)
    assert committed.partition_bytes == [os.path.getsize(os.path.join(location, name)) for name in committed.files]
    assert read_committed(location) == committed
    assert sorted(os.listdir(location)) == sorted([MARKER, committed.attempt])
    # pyarrow's folder read still finds the data while one attempt is all there is; Spark's does not look
    # into the attempt's folder unless asked to (readers should use the marker's files, as below).
    assert pq.read_table(location).num_rows == 1000
    assert spark.read.option("recursiveFileLookup", "true").parquet(spark_uri(location)).count() == 1000

    # A late attempt of the same try writes next to the committed output; readers do not see it.
    straggler = join(location, f"{ATTEMPT_PREFIX}late")
    spark.range(5000, 5007).selectExpr("id", "id % 5 AS k").write.parquet(spark_uri(straggler))
    from airflow_provider_finegrained.runtime.driver import ClassicSessions

    sessions: Sessions = ClassicSessions(spark)  # the carrier gives the committed read its storage options
    read = _load_input(spark, InputRef("orders", "committed", path=location), sessions)
    assert sorted(r.id for r in read.select("id").collect()) == list(range(1000))
    assert sorted(read.inputFiles()) == sorted(spark_uri(uri) for uri in committed.uris)
    assert read.columns == ["id", "k"]

    with pytest.raises(OutputAlreadyExistsError, match="already exists"):
        write_and_commit(df, location, root=root)

    # External data: a local path is handed to Spark as file://.
    external = _load_input(spark, InputRef("ext", "external", path=os.path.join(location, committed.attempt)), sessions)
    assert external.count() == 1000


@pytest.mark.slow
def test_a_spark_write_revoked_while_it_runs_publishes_nothing(spark: Any, tmp_path: Path) -> None:
    """The issue's race with Spark itself: a retry takes the stage over while the old try's tasks write."""
    from pyspark.sql.functions import udf

    root = str(tmp_path / "storage")
    old, new = (Fence.for_stage(root, "dag", "run", "stage", n) for n in (1, 2))
    old.raise_to_token()
    revoke_at = f"{new.folder}/try={new.token}"

    @udf("long", useArrow=False)  # the module's session runs workers on the PATH's python
    def revoking(value: int) -> int:  # runs in Spark's Python worker, mid-write, as the retry's clean-up would
        import os as worker_os

        worker_os.makedirs(worker_os.path.dirname(revoke_at), exist_ok=True)
        open(revoke_at, "a").close()
        return value

    location = output_location(root, "dag", "run", "stage", 1)
    df = spark.range(0, 20, numPartitions=2).select(revoking("id").alias("id"))
    with pytest.raises(FencedError, match=r"try 1 may not publish .* try 2 of the stage has superseded it"):
        write_and_commit(df, location, root=root, fence=old)
    assert not os.path.exists(os.path.join(location, MARKER))
    assert not os.path.exists(location) or all(not n.startswith(ATTEMPT_PREFIX) for n in os.listdir(location))
    committed = write_and_commit(spark.range(20), output_location(root, "dag", "run", "stage", 2), fence=new)
    assert committed.rows == 20 and read_committed(committed.path).fence == new


@pytest.mark.slow
def test_the_driver_reaches_the_store_with_the_sessions_hadoop_settings(spark: Any) -> None:
    assert storage_options(spark, "s3://bucket/x") == {"key": "AKIA-TEST", "endpoint_url": "http://127.0.0.1:9"}
    assert storage_options(spark, "/local/path") == {}


@pytest.mark.slow
def test_a_region_runs_with_its_folder_on_another_filesystem(spark: Any, tmp_path: Path) -> None:
    from pyspark import cloudpickle

    from airflow_provider_finegrained.runtime.driver import ClassicSessions
    from airflow_provider_finegrained.runtime.job import RegionJob, StageJob, StageStatus
    from airflow_provider_finegrained.runtime.region_loop import run_stages
    from airflow_provider_finegrained.storage.filesystem import remove, write_bytes

    root = f"file://{tmp_path}/storage"
    folder = f"memory://fg-region-test/{tmp_path.name}"  # job folder, callables and statuses off the local disk
    write_bytes(join(folder, "callable-squares.pkl"), cloudpickle.dumps(lambda spark, n: spark.range(n)))  # type: ignore[no-untyped-call, unused-ignore]
    squares = StageJob(
        name="squares",
        inputs=[],
        session_conf={"spark.sql.shuffle.partitions": "2"},
        output_location=output_location(root, "dag", "run", "squares", 1),
        callable_path=join(folder, "callable-squares.pkl"),
        kwargs={"n": 12},
    )
    broken = StageJob("broken", [], {}, None, callable_path=join(folder, "missing.pkl"))
    after = StageJob("after", [], {}, None, callable_path=join(folder, "callable-squares.pkl"), kwargs={"n": 1})
    job = RegionJob("region-0", "dag", "run", 1, root, folder, [squares, broken, after])
    try:
        assert run_stages(job, ClassicSessions(spark), status_storage={}) == "broken"
        done = StageStatus.read(job.status_path("squares"))
        assert done is not None and done.state == "success" and done.output is not None
        assert read_committed(done.output["path"]).rows == 12
        failed = StageStatus.read(job.status_path("broken"))
        assert failed is not None and failed.state == "failed" and "FileNotFoundError" in (failed.error or "")
        not_run = StageStatus.read(job.status_path("after"))
        assert not_run is not None and not_run.state == "not_run"
    finally:
        remove(folder)
