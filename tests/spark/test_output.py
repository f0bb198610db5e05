"""The commit protocol on a plain folder, with part files written by pyarrow (no Spark)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from airflow_provider_finegrained.runtime.output import (
    MARKER,
    CommittedOutput,
    OutputAlreadyExistsError,
    OutputCorruptError,
    OutputError,
    OutputNotCommittedError,
    begin_output,
    cleanup_uncommitted,
    commit_output,
    data_files,
    ensure_inside_root,
    local_root,
    output_location,
    read_committed,
    sanitize_component,
    stage_folder,
    write_with,
)


def _parts_writer(rows_per_part: list[int]) -> Callable[[str], None]:
    """A stand-in for Spark's writer: part files, a _SUCCESS file and .crc files."""

    def write(staging: str) -> None:
        os.makedirs(staging)
        start = 0
        for index, rows in enumerate(rows_per_part):
            table = pa.table({"id": list(range(start, start + rows)), "name": [f"n{i}" for i in range(rows)]})
            name = f"part-{index:05d}-0d5b8f3e-c000.snappy.parquet"
            pq.write_table(table, os.path.join(staging, name))
            Path(staging, f".{name}.crc").write_bytes(b"crc")
            start += rows
        Path(staging, "_SUCCESS").write_bytes(b"")

    return write


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
def test_traversal_and_absolute_components_are_rejected(value: str) -> None:
    with pytest.raises(ValueError, match="stage_id"):
        sanitize_component(value, "stage_id")


def test_output_location_layout(tmp_path: Path) -> None:
    root = str(tmp_path)
    location = output_location(root, "etl", "manual__1", "clean.orders", 2)
    assert location == os.path.join(root, "etl", "manual__1", "clean.orders", "try=2")
    assert stage_folder(root, "etl", "manual__1", "clean.orders") == os.path.dirname(location)
    assert output_location("file://" + root, "etl", "manual__1", "clean.orders", 2) == location


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (("..", "r", "s", 1), "dag_id"),
        (("d", "../..", "s", 1), "run_id"),
        (("d", "r", "/abs", 1), "stage_id"),
        (("d", "r", "s", -1), "try_number"),
        (("d", "r", "s", True), "try_number"),
    ],
)
def test_output_location_rejects_bad_input(tmp_path: Path, args: tuple[str, str, str, int], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        output_location(str(tmp_path), *args)


@pytest.mark.parametrize("root", ["relative/root", "s3://bucket/root", "hdfs://nn/x"])
def test_unsupported_roots(root: str) -> None:
    with pytest.raises(ValueError, match="storage root"):
        local_root(root)


def test_ensure_inside_root(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    (tmp_path / "root2").mkdir()
    assert ensure_inside_root(str(root), str(root / "a" / "b")) == str(root / "a" / "b")
    assert ensure_inside_root(str(root), "a/b") == str(root / "a" / "b")
    assert ensure_inside_root(str(root), str(root)) == str(root)
    for escaping in [str(tmp_path / "root2" / "x"), "../root2", str(root / ".." / "x"), "/etc/passwd"]:
        with pytest.raises(ValueError, match="escapes the storage root"):
            ensure_inside_root(str(root), escaping)
    # A symlink inside the root that points outside it is an escape too.
    (root / "link").symlink_to(tmp_path / "root2")
    with pytest.raises(ValueError, match="escapes"):
        ensure_inside_root(str(root), str(root / "link" / "x"))


# ---------------------------------------------------------------- commit protocol


def test_write_commit_and_read(tmp_path: Path) -> None:
    location = output_location(str(tmp_path), "dag", "run", "stage", 1)
    committed = write_with(location, _parts_writer([3, 0, 5]))

    assert committed.path == location
    assert committed.format == "parquet"
    assert committed.rows == 8
    assert committed.files == [f"part-{i:05d}-0d5b8f3e-c000.snappy.parquet" for i in range(3)]
    assert committed.partition_bytes == [os.path.getsize(os.path.join(location, f)) for f in committed.files]
    assert committed.total_bytes == sum(committed.partition_bytes)
    assert read_committed(location) == committed

    marker = json.loads(Path(location, MARKER).read_text())
    assert marker["rows"] == 8 and marker["format"] == "parquet" and marker["path"] == location
    assert marker["partition_bytes"] == committed.partition_bytes
    assert marker["protocol"] == 1 and "committed_at" in marker
    # Only the published folder and nothing temporary is left in the stage folder.
    assert os.listdir(os.path.dirname(location)) == ["try=1"]
    assert sorted(os.listdir(location)) == sorted(
        [MARKER, "_SUCCESS", *committed.files, *(f".{f}.crc" for f in committed.files)]
    )
    # The files Spark would read are exactly the data files.
    assert pq.read_table(location).num_rows == 8


def test_part_files_are_ordered_by_part_number(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    for name in ["part-00010-x.parquet", "part-00002-x.parquet", "part-100000-x.parquet", "_SUCCESS"]:
        (folder / name).write_bytes(b"x")
    (folder / "_temporary").mkdir()
    (folder / "_temporary" / "part-00000-x.parquet").write_bytes(b"x")
    (folder / "k=1").mkdir()
    (folder / "k=1" / "part-00001-x.parquet").write_bytes(b"x")
    assert data_files(str(folder)) == [
        "part-00002-x.parquet",
        "part-00010-x.parquet",
        "part-100000-x.parquet",
        "k=1/part-00001-x.parquet",
    ]


def test_orc_rows_are_counted(tmp_path: Path) -> None:
    def write(staging: str) -> None:
        os.makedirs(staging)
        orc.write_table(pa.table({"v": [1, 2, 3, 4]}), os.path.join(staging, "part-00000-a.orc"))

    committed = write_with(str(tmp_path / "try=1"), write, fmt="orc")
    assert committed.rows == 4 and committed.format == "orc"


def test_second_writer_of_a_location_is_refused(tmp_path: Path) -> None:
    location = output_location(str(tmp_path), "dag", "run", "stage", 1)
    write_with(location, _parts_writer([2]))
    with pytest.raises(OutputAlreadyExistsError, match="already exists"):
        write_with(location, _parts_writer([4]))
    assert read_committed(location).rows == 2


def test_race_between_two_writers_lets_exactly_one_publish(tmp_path: Path) -> None:
    location = output_location(str(tmp_path), "dag", "run", "stage", 1)
    # Both passed the early check before either published.
    staging_a = begin_output(location)
    staging_b = begin_output(location)
    _parts_writer([2])(staging_a)
    _parts_writer([7])(staging_b)
    commit_output(staging_a, location)
    with pytest.raises(OutputAlreadyExistsError, match="another writer"):
        commit_output(staging_b, location)
    assert read_committed(location).rows == 2


def test_a_failed_write_leaves_nothing(tmp_path: Path) -> None:
    location = output_location(str(tmp_path), "dag", "run", "stage", 1)

    def half_write(staging: str) -> None:
        _parts_writer([2, 2])(staging)
        raise RuntimeError("executor lost")

    with pytest.raises(RuntimeError, match="executor lost"):
        write_with(location, half_write)
    assert os.listdir(os.path.dirname(location)) == []
    with pytest.raises(OutputNotCommittedError):
        read_committed(location)


def test_a_write_without_data_files_is_not_committed(tmp_path: Path) -> None:
    location = str(tmp_path / "try=1")
    with pytest.raises(OutputError, match="no data files"):
        write_with(location, lambda staging: os.makedirs(staging))
    assert not os.path.exists(location)


def test_unsupported_format(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unsupported output format 'csv'"):
        write_with(str(tmp_path / "try=1"), _parts_writer([1]), fmt="csv")


def test_read_missing_output_names_the_path(tmp_path: Path) -> None:
    location = output_location(str(tmp_path), "dag", "run", "stage", 3)
    with pytest.raises(OutputNotCommittedError) as caught:
        read_committed(location)
    assert location in str(caught.value) and "does not exist" in str(caught.value)
    os.makedirs(location)
    with pytest.raises(OutputNotCommittedError, match="no _COMMITTED marker"):
        read_committed(location)


def test_read_detects_tampered_output(tmp_path: Path) -> None:
    location = str(tmp_path / "try=1")
    committed = write_with(location, _parts_writer([5, 5]))
    with open(os.path.join(location, committed.files[1]), "ab") as handle:
        handle.write(b"junk")
    with pytest.raises(OutputCorruptError, match=committed.files[1]):
        read_committed(location)
    assert read_committed(location, verify=False).rows == 10
    Path(location, MARKER).write_text("{not json")
    with pytest.raises(OutputCorruptError, match="unreadable marker"):
        read_committed(location)


def test_read_follows_a_moved_root(tmp_path: Path) -> None:
    location = str(tmp_path / "old" / "try=1")
    write_with(location, _parts_writer([1]))
    os.rename(tmp_path / "old", tmp_path / "new")
    assert read_committed(str(tmp_path / "new" / "try=1")).path == str(tmp_path / "new" / "try=1")


def test_committed_output_round_trips_through_json() -> None:
    output = CommittedOutput("/r/try=1", "parquet", [10, 20], 7, ["part-0", "part-1"])
    assert CommittedOutput.from_dict(json.loads(json.dumps(output.to_dict()))) == output
    with pytest.raises(ValueError, match="malformed"):
        CommittedOutput.from_dict({"path": "/x"})
    with pytest.raises(ValueError, match="different numbers"):
        CommittedOutput.from_dict(output.to_dict() | {"files": ["only-one"]})


def test_cleanup_uncommitted_removes_only_staging_folders(tmp_path: Path) -> None:
    stage = stage_folder(str(tmp_path), "dag", "run", "stage")
    write_with(os.path.join(stage, "try=1"), _parts_writer([1]))
    leftover = begin_output(os.path.join(stage, "try=2"))
    _parts_writer([3])(leftover)
    os.makedirs(os.path.join(leftover, "_temporary", "0"))
    Path(stage, ".tmp-note").write_text("a file, not a staging folder")

    assert cleanup_uncommitted(stage) == [leftover]
    assert sorted(os.listdir(stage)) == [".tmp-note", "try=1"]
    assert read_committed(os.path.join(stage, "try=1")).rows == 1
    assert cleanup_uncommitted(stage) == []
    assert cleanup_uncommitted(str(tmp_path / "missing")) == []


def test_runtime_api_outside_the_provider_says_how_it_is_meant_to_run() -> None:
    from airflow_provider_finegrained.runtime.api import StageContextError, current_stage

    with pytest.raises(StageContextError, match=r"only available when the provider runs this file as a stage"):
        current_stage()
