"""Tables of cases for storage locations: roots, joins, containment, the layout and what Spark is given."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_finegrained.storage.errors import StorageConfigError
from airflow_provider_finegrained.storage.locations import (
    basename,
    ensure_inside_root,
    is_local,
    join,
    normalize_root,
    output_location,
    parent,
    redact,
    region_folder,
    relative_to,
    same_store,
    scheme_of,
    spark_uri,
    stage_folder,
)


@pytest.mark.parametrize(
    ("root", "expected"),
    [
        ("/data/fg", "/data/fg"),
        ("/data//fg/./x/../", "/data/fg"),
        ("file:///data/fg/", "/data/fg"),
        ("file:/data/fg", "/data/fg"),
        ("file://localhost/data/fg", "/data/fg"),
        ("local:///data/fg", "/data/fg"),
        ("s3://bucket/prefix/", "s3://bucket/prefix"),
        ("S3://bucket/a//b/./c", "s3://bucket/a/b/c"),
        ("s3a://bucket", "s3a://bucket"),
        ("s3://bucket/", "s3://bucket"),
        ("hdfs://nn:8020/user/fg", "hdfs://nn:8020/user/fg"),
        ("hdfs:///user/fg", "hdfs:///user/fg"),
        ("gs://bucket/x", "gs://bucket/x"),
        ("abfss://container@account.dfs.core.windows.net/x/", "abfss://container@account.dfs.core.windows.net/x"),
        ("memory://fg/root", "memory://fg/root"),
    ],
)
def test_roots_are_normalised(root: str, expected: str) -> None:
    assert normalize_root(root) == expected


@pytest.mark.parametrize(
    ("root", "match"),
    [
        ("", "must be a non-empty path or URL"),
        ("relative/x", "must be an absolute path or a URL; allowed: /data/finegrained"),
        ("file://otherhost/x", "names host 'otherhost'; a file: URL must be local"),
        ("file:relative", "must be an absolute path"),
        ("s3:///no-bucket", "names no bucket or container; allowed: s3://bucket/prefix"),
        ("abfs:///x", "names no bucket or container"),
        ("s3://bucket/x?versionId=1", "must not have a query or fragment"),
        ("s3://AKIA:topsecret@bucket/x", r"'s3://AKIA:\*\*\*@bucket/x' carries a password in the URL"),
        ("/x\x00y", "NUL character"),
    ],
)
def test_bad_roots_are_refused_with_what_is_allowed(root: str, match: str) -> None:
    with pytest.raises(StorageConfigError, match=match) as caught:
        normalize_root(root)
    assert str(caught.value).startswith("storage_root ")
    assert "topsecret" not in str(caught.value)


@pytest.mark.parametrize(
    ("location", "scheme", "local"),
    [
        ("/data/x", "file", True),
        ("file:///data/x", "file", True),
        ("local:///data/x", "file", True),
        ("s3://b/x", "s3", False),
        ("S3A://b/x", "s3a", False),
        ("hdfs://nn/x", "hdfs", False),
        ("memory://x", "memory", False),
    ],
)
def test_scheme_and_locality(location: str, scheme: str, local: bool) -> None:
    assert scheme_of(location) == scheme and is_local(location) is local


@pytest.mark.parametrize(
    ("base", "parts", "expected"),
    [
        ("/data", ("a", "b"), "/data/a/b"),
        ("/", ("a",), "/a"),
        ("s3://bucket", ("a", "b/c"), "s3://bucket/a/b/c"),
        ("s3://bucket/p/", ("a/",), "s3://bucket/p/a"),
        ("hdfs:///", ("x",), "hdfs:///x"),
        ("memory://r", ("", "x"), "memory://r/x"),
    ],
)
def test_join(base: str, parts: tuple[str, ...], expected: str) -> None:
    assert join(base, *parts) == expected


@pytest.mark.parametrize("part", ["/abs", "s3://other/x"])
def test_join_refuses_absolute_parts(part: str) -> None:
    with pytest.raises(ValueError, match="cannot join absolute"):
        join("s3://bucket", part)


@pytest.mark.parametrize(
    ("location", "expected_parent", "expected_name"),
    [
        ("/data/a/b", "/data/a", "b"),
        ("/data", "/", "data"),
        ("s3://bucket/a/b", "s3://bucket/a", "b"),
        ("s3://bucket/a", "s3://bucket", "a"),
        ("s3://bucket", "s3://bucket", "bucket"),
        ("hdfs:///x/y", "hdfs:///x", "y"),
        ("memory://r/x/", "memory://r", "x"),
    ],
)
def test_parent_and_basename(location: str, expected_parent: str, expected_name: str) -> None:
    assert parent(location) == expected_parent and basename(location) == expected_name


def test_relative_to() -> None:
    assert relative_to("s3://b/x", "s3://b/x/attempt-1/part-0") == "attempt-1/part-0"
    with pytest.raises(ValueError, match="is not under"):
        relative_to("s3://b/x", "s3://b/xy/part-0")


@pytest.mark.parametrize(
    ("root", "path", "expected"),
    [
        ("s3://bucket/root", "a/b", "s3://bucket/root/a/b"),
        ("s3://bucket/root", "s3://bucket/root/a", "s3://bucket/root/a"),
        ("s3://bucket/root", "s3a://bucket/root/a", "s3a://bucket/root/a"),  # s3a is the same store
        ("s3a://bucket/root/", "s3://bucket/root", "s3://bucket/root"),
        ("s3://bucket", "s3://bucket/any/where", "s3://bucket/any/where"),
        ("hdfs://nn/fg", "hdfs://nn/fg/x/../y", "hdfs://nn/fg/y"),
        ("memory://r", "memory://r/x", "memory://r/x"),
    ],
)
def test_uri_paths_inside_the_root(root: str, path: str, expected: str) -> None:
    assert ensure_inside_root(root, path) == expected


@pytest.mark.parametrize(
    ("root", "path"),
    [
        ("s3://bucket/root", "../other"),
        ("s3://bucket/root", "a/../../other"),
        ("s3://bucket/root", "s3://bucket/root2/x"),
        ("s3://bucket/root", "s3://other-bucket/root/x"),
        ("s3://bucket/root", "gs://bucket/root/x"),
        ("s3://bucket/root", "/root/x"),
        ("/data/root", "s3://bucket/x"),
        ("hdfs://nn1/fg", "hdfs://nn2/fg/x"),
    ],
)
def test_uri_paths_escaping_the_root(root: str, path: str) -> None:
    with pytest.raises(ValueError, match="escapes the storage root"):
        ensure_inside_root(root, path)


def test_local_containment_resolves_symlinks(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "root2").mkdir()
    assert ensure_inside_root(str(root), "a/b") == str(root / "a" / "b")
    assert ensure_inside_root(f"file://{root}", str(root / "a")) == str(root / "a")
    for escaping in [str(tmp_path / "root2" / "x"), "../root2", str(root / ".." / "x"), "/etc/passwd"]:
        with pytest.raises(ValueError, match="escapes the storage root"):
            ensure_inside_root(str(root), escaping)
    (root / "link").symlink_to(tmp_path / "root2")
    with pytest.raises(ValueError, match="escapes"):
        ensure_inside_root(str(root), str(root / "link" / "x"))


@pytest.mark.parametrize(
    "root", ["s3://bucket/fg", "s3a://bucket/fg/", "hdfs://nn:8020/fg", "memory://fg", "gs://b/fg", "/data/fg"]
)
def test_layout_on_any_root(root: str) -> None:
    base = normalize_root(root)
    run = "manual__2026-11-22T01:02:03+00:00"
    safe_run = stage_folder(root, "etl", run, "s").split("/")[-2]
    assert safe_run.startswith("manual__2026-11-22T01_02_03_00_00-")
    assert stage_folder(root, "etl", run, "clean.orders") == f"{base}/etl/{safe_run}/clean.orders"
    assert output_location(root, "etl", run, "clean.orders", 2) == f"{base}/etl/{safe_run}/clean.orders/try=2"
    assert region_folder(root, "etl", run, "region 0", 1).startswith(f"{base}/etl/{safe_run}/_regions/region_0-")
    with pytest.raises(ValueError, match="try_number"):
        region_folder(root, "etl", run, "r", -1)
    with pytest.raises(ValueError, match="stage_id"):
        output_location(root, "etl", run, "../x", 1)


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("/data/fg/try=1", "file:///data/fg/try=1"),
        ("file:/data/fg", "file:///data/fg"),
        ("file:///data/fg", "file:///data/fg"),
        ("s3://bucket/x", "s3a://bucket/x"),
        ("s3n://bucket/x", "s3a://bucket/x"),
        ("s3a://bucket/x", "s3a://bucket/x"),
        ("hdfs://nn:8020/x", "hdfs://nn:8020/x"),
        ("gs://bucket/x", "gs://bucket/x"),
        ("abfss://c@a.dfs.core.windows.net/x", "abfss://c@a.dfs.core.windows.net/x"),
        ("relative/input", "relative/input"),
    ],
)
def test_spark_uri(location: str, expected: str) -> None:
    assert spark_uri(location) == expected


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("s3://key:secret@bucket/x", "s3://key:***@bucket/x"),
        ("abfs://container@account.dfs.core.windows.net/x", "abfs://container@account.dfs.core.windows.net/x"),
        ("/data/x", "/data/x"),
    ],
)
def test_redact(location: str, expected: str) -> None:
    assert redact(location) == expected


@pytest.mark.parametrize(
    ("location", "other", "same"),
    [
        ("/data/in", "/srv/fg", True),
        ("file:///data/in", "/srv/fg", True),
        ("s3://lake/raw/x.parquet", "s3a://lake/fg", True),
        ("s3://other/raw", "s3://lake/fg", False),
        ("gs://lake/raw", "s3://lake/fg", False),
        ("/data/in", "s3://lake/fg", False),
        ("hdfs://nn:8020/raw", "hdfs://nn:8020/fg", True),
    ],
)
def test_same_store_decides_whether_the_roots_credentials_apply(location: str, other: str, same: bool) -> None:
    assert same_store(location, other) is same
