"""The Python side of the commit protocol, the same tests on a local folder, memory:// and a real S3 API.

Part files are written by pyarrow through fsspec (a stand-in for Spark's writer, with its _SUCCESS
and .crc files); the Spark side runs in tests/runtime/test_output.py.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable

import pyarrow as pa
import pyarrow.orc as orc
import pyarrow.parquet as pq
import pytest

from airflow_provider_finegrained.runtime.output import (
    ATTEMPT_PREFIX,
    MARKER,
    PROTOCOL_VERSION,
    CommittedOutput,
    OutputAlreadyExistsError,
    OutputCorruptError,
    OutputError,
    OutputNotCommittedError,
    output_location,
    read_committed,
    stage_folder,
)
from airflow_provider_finegrained.runtime.output_cleanup import cleanup_uncommitted
from airflow_provider_finegrained.runtime.output_commit import begin_output, commit_output, data_files, write_with
from airflow_provider_finegrained.storage.filesystem import (
    exists,
    list_files,
    list_folder,
    open_file,
    read_bytes,
    read_json,
    remove,
    write_bytes,
)
from airflow_provider_finegrained.storage.locations import join
from tests.storage.conftest import Store

Writer = Callable[[str], None]


def parts_writer(store: Store, rows_per_part: list[int], first_id: int = 0) -> Writer:
    """Writes parquet part files, a _SUCCESS file and .crc files into a staging prefix, as Spark does."""

    def write(staging: str) -> None:
        job = uuid.uuid4()
        start = first_id
        for index, rows in enumerate(rows_per_part):
            table = pa.table({"id": list(range(start, start + rows)), "name": [f"n{i}" for i in range(rows)]})
            name = f"part-{index:05d}-{job}-c000.snappy.parquet"
            with open_file(join(staging, name), "wb", store.options) as handle:
                pq.write_table(table, handle)
            write_bytes(join(staging, f".{name}.crc"), b"crc", store.options)
            start += rows
        write_bytes(join(staging, "_SUCCESS"), b"", store.options)

    return write


def read_ids(store: Store, uris: list[str]) -> list[int]:
    ids: list[int] = []
    for uri in uris:
        with open_file(uri, "rb", store.options) as handle:
            ids += pq.read_table(handle).column("id").to_pylist()
    return ids


def location_of(store: Store, try_number: int = 1) -> str:
    return output_location(store.root, "dag", "manual__2026-11-22T01:02:03+00:00", "stage", try_number)


def test_write_commit_and_read(store: Store) -> None:
    location = location_of(store)
    committed = write_with(location, parts_writer(store, [3, 0, 5]), storage_options=store.options)

    assert committed.path == location and committed.format == "parquet" and committed.rows == 8
    assert committed.attempt.startswith(ATTEMPT_PREFIX)
    assert [name.rpartition("/")[2][:10] for name in committed.files] == ["part-00000", "part-00001", "part-00002"]
    assert all(name.startswith(committed.attempt + "/") for name in committed.files)
    on_store = list_files(location, store.options)
    assert committed.partition_bytes == [on_store[name] for name in committed.files]
    assert committed.uris == [join(location, name) for name in committed.files]
    assert read_committed(location, storage_options=store.options) == committed
    assert read_ids(store, committed.uris) == list(range(8))

    marker = read_json(join(location, MARKER), store.options)
    assert marker["protocol"] == PROTOCOL_VERSION == 2 and "committed_at" in marker
    assert marker["rows"] == 8 and marker["format"] == "parquet" and marker["path"] == location
    assert marker["files"] == committed.files and marker["partition_bytes"] == committed.partition_bytes
    # Nothing but the try's folder in the stage folder, and in it the marker and one attempt.
    assert list_folder(
        stage_folder(store.root, "dag", "manual__2026-11-22T01:02:03+00:00", "stage"), store.options
    ) == [("try=1", True)]
    assert list_folder(location, store.options) == [(MARKER, False), (committed.attempt, True)]


def test_orc_rows_are_counted_from_footers(store: Store) -> None:
    def write(staging: str) -> None:
        with open_file(join(staging, "part-00000-a.orc"), "wb", store.options) as handle:
            orc.write_table(pa.table({"v": [1, 2, 3, 4]}), handle)

    committed = write_with(location_of(store), write, fmt="orc", storage_options=store.options)
    assert committed.rows == 4 and committed.format == "orc"


def test_data_files_skip_hidden_names_and_keep_part_order(store: Store) -> None:
    folder = join(store.root, "out")
    for name in [
        "part-00010-x.parquet",
        "part-00002-x.parquet",
        "part-100000-x.parquet",
        "_SUCCESS",
        "_temporary/0/part-00000-x.parquet",
        ".part-00002-x.parquet.crc",
        "k=1/part-00001-x.parquet",
    ]:
        write_bytes(join(folder, name), b"x", store.options)
    assert data_files(folder, storage_options=store.options) == [
        "part-00002-x.parquet",
        "part-00010-x.parquet",
        "part-100000-x.parquet",
        "k=1/part-00001-x.parquet",
    ]


@pytest.mark.security
def test_a_second_writer_of_a_committed_location_is_refused(store: Store) -> None:
    location = location_of(store)
    write_with(location, parts_writer(store, [2]), storage_options=store.options)
    with pytest.raises(OutputAlreadyExistsError, match="already exists"):
        write_with(location, parts_writer(store, [4]), storage_options=store.options)
    assert read_committed(location, storage_options=store.options).rows == 2


@pytest.mark.security
def test_two_concurrent_tries_never_both_commit(store: Store) -> None:
    location = location_of(store)
    # Both passed the early check and wrote their files before either committed.
    staging_a = begin_output(location, storage_options=store.options)
    staging_b = begin_output(location, storage_options=store.options)
    assert staging_a != staging_b
    parts_writer(store, [2])(staging_a)
    parts_writer(store, [7], first_id=100)(staging_b)
    winner = commit_output(staging_a, location, storage_options=store.options)
    with pytest.raises(OutputAlreadyExistsError, match="another writer"):
        commit_output(staging_b, location, storage_options=store.options)
    committed = read_committed(location, storage_options=store.options)
    assert committed == winner and committed.rows == 2
    # The loser's files sit next to the committed output; readers use only the listed files.
    assert any(name.startswith(staging_b.rpartition("/")[2]) for name in list_files(location, store.options))
    assert read_ids(store, committed.uris) == [0, 1]


@pytest.mark.security
def test_concurrent_commits_in_threads_let_exactly_one_win(tmp_path: object) -> None:
    # Locally the marker is a hard link: atomic even when both commits run at the same instant.
    store = Store("local", f"{tmp_path}/storage")
    location = location_of(store)
    stagings = [begin_output(location) for _ in range(4)]
    for index, staging in enumerate(stagings):
        parts_writer(store, [index + 1])(staging)
    barrier = threading.Barrier(len(stagings))
    outcomes: list[object] = []

    def commit(staging: str) -> None:
        barrier.wait()
        try:
            outcomes.append(commit_output(staging, location))
        except OutputAlreadyExistsError as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=commit, args=(s,)) for s in stagings]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    winners = [o for o in outcomes if isinstance(o, CommittedOutput)]
    assert len(outcomes) == 4 and len(winners) == 1
    assert read_committed(location) == winners[0]


def test_a_stragglers_files_next_to_a_committed_output_are_not_read(store: Store) -> None:
    location = location_of(store)
    committed = write_with(location, parts_writer(store, [3, 3]), storage_options=store.options)
    # A late attempt (a zombie try) writes its own files after the commit, under the same location.
    straggler = join(location, f"{ATTEMPT_PREFIX}late")
    parts_writer(store, [50], first_id=1000)(straggler)
    write_bytes(join(location, "part-99999-stray.parquet"), b"not even parquet", store.options)

    again = read_committed(location, storage_options=store.options)
    assert again == committed
    assert read_ids(store, again.uris) == list(range(6))
    assert not any("late" in uri or "stray" in uri for uri in again.uris)


def test_a_missing_or_short_file_is_detected(store: Store) -> None:
    location = location_of(store)
    committed = write_with(location, parts_writer(store, [5, 5]), storage_options=store.options)
    first, second = committed.uris
    data = read_bytes(first, store.options)
    write_bytes(first, data[: len(data) // 2], store.options)
    with pytest.raises(OutputCorruptError, match=rf"{committed.files[0]} should have \d+ bytes, found \d+"):
        read_committed(location, storage_options=store.options)
    remove(second, store.options)
    write_bytes(first, data, store.options)
    with pytest.raises(OutputCorruptError, match=f"{committed.files[1]} should have .* found no such file"):
        read_committed(location, storage_options=store.options)
    # Without verification the marker alone is trusted.
    assert read_committed(location, verify=False, storage_options=store.options).rows == 10


def test_a_failed_write_leaves_nothing_committed(store: Store) -> None:
    location = location_of(store)

    def half_write(staging: str) -> None:
        parts_writer(store, [2, 2])(staging)
        raise RuntimeError("executor lost")

    with pytest.raises(RuntimeError, match="executor lost"):
        write_with(location, half_write, storage_options=store.options)
    assert list_files(location, store.options) == {}
    with pytest.raises(OutputNotCommittedError, match="does not exist"):
        read_committed(location, storage_options=store.options)


def test_a_write_without_data_files_is_not_committed(store: Store) -> None:
    location = location_of(store)

    def only_success(staging: str) -> None:
        write_bytes(join(staging, "_SUCCESS"), b"", store.options)

    with pytest.raises(OutputError, match="no data files were written"):
        write_with(location, only_success, storage_options=store.options)
    assert not exists(join(location, MARKER), store.options)


def test_read_of_an_uncommitted_location_says_why(store: Store) -> None:
    location = location_of(store, 3)
    with pytest.raises(OutputNotCommittedError, match="does not exist"):
        read_committed(location, storage_options=store.options)
    parts_writer(store, [1])(join(location, f"{ATTEMPT_PREFIX}running"))
    with pytest.raises(OutputNotCommittedError, match="has no _COMMITTED marker"):
        read_committed(location, storage_options=store.options)


@pytest.mark.parametrize(
    ("marker", "match"),
    [
        (b"{not json", "unreadable marker"),
        (b"[1, 2]", "not an object"),
        (json.dumps({"protocol": 99, "path": "x"}).encode(), r"protocol 99, this provider reads \[1, 2\]"),
        (json.dumps({"protocol": 2, "path": "x"}).encode(), "malformed"),
        (
            json.dumps(
                {
                    "protocol": 2,
                    "path": "x",
                    "format": "parquet",
                    "partition_bytes": [1],
                    "rows": 1,
                    "files": ["../../other/part-0.parquet"],
                }
            ).encode(),
            "outside its location",
        ),
    ],
)
def test_bad_markers_are_refused(store: Store, marker: bytes, match: str) -> None:
    location = location_of(store)
    write_bytes(join(location, MARKER), marker, store.options)
    with pytest.raises(OutputCorruptError, match=match):
        read_committed(location, storage_options=store.options)


def test_protocol_1_outputs_are_still_read(store: Store) -> None:
    # Protocol 1 published a renamed folder: data files at the top of the location, no attempt folder.
    location = location_of(store)
    parts_writer(store, [4])(location)
    name = next(n for n in list_files(location, store.options) if n.startswith("part-"))
    size = list_files(location, store.options)[name]
    marker = {
        "protocol": 1,
        "path": "/elsewhere/try=1",
        "format": "parquet",
        "rows": 4,
        "total_bytes": size,
        "partition_bytes": [size],
        "files": [name],
    }
    write_bytes(join(location, MARKER), json.dumps(marker).encode(), store.options)
    committed = read_committed(location, storage_options=store.options)
    assert committed.path == location and committed.attempt == "" and committed.data_root == location
    assert read_ids(store, committed.uris) == [0, 1, 2, 3]


def test_cleanup_removes_uncommitted_tries_and_stragglers_only(store: Store) -> None:
    run = "manual__1"
    stage = stage_folder(store.root, "dag", run, "stage")
    committed = write_with(join(stage, "try=1"), parts_writer(store, [1]), storage_options=store.options)
    straggler = join(stage, "try=1", f"{ATTEMPT_PREFIX}late")
    parts_writer(store, [3])(straggler)
    uncommitted = join(stage, "try=2")
    parts_writer(store, [3])(join(uncommitted, f"{ATTEMPT_PREFIX}killed"))
    old_staging = join(stage, ".tmp-try=3-0123abcd")  # protocol 1's staging folder
    parts_writer(store, [1])(old_staging)
    write_bytes(join(stage, ".tmp-note"), b"a file, not a staging folder", store.options)

    removed = cleanup_uncommitted(stage, storage_options=store.options)
    assert sorted(removed) == sorted([straggler, uncommitted, old_staging])
    assert [name for name, _ in list_folder(stage, store.options)] == [".tmp-note", "try=1"]
    assert read_committed(join(stage, "try=1"), storage_options=store.options) == committed
    assert cleanup_uncommitted(stage, storage_options=store.options) == []
    assert cleanup_uncommitted(join(store.root, "missing"), storage_options=store.options) == []


def test_cleanup_keeps_a_try_whose_marker_is_unreadable(store: Store) -> None:
    stage = stage_folder(store.root, "dag", "run", "stage")
    parts_writer(store, [1])(join(stage, "try=1", f"{ATTEMPT_PREFIX}a"))
    write_bytes(join(stage, "try=1", MARKER), b"{broken", store.options)
    assert cleanup_uncommitted(stage, storage_options=store.options) == []
    assert list_files(join(stage, "try=1"), store.options)
