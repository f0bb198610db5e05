"""The filesystem calls every storage user goes through, on a local folder, memory:// and a real S3 API."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from fsspec.implementations.local import LocalFileSystem

from airflow_provider_finegrained.storage.errors import StorageConfigError
from airflow_provider_finegrained.storage.filesystem import (
    create_exclusive,
    exists,
    filesystem,
    list_files,
    list_folder,
    make_folder,
    read_bytes,
    read_json,
    remove,
    remove_empty_folder,
    reset_folder,
    upload_file,
    write_bytes,
    write_json,
)
from airflow_provider_finegrained.storage.locations import join
from tests.storage.conftest import Store, s3_options


def test_create_exclusive_lets_one_creator_win(store: Store) -> None:
    target = join(store.root, "x", "_COMMITTED")
    create_exclusive(target, b"first", store.options)
    with pytest.raises(FileExistsError):
        create_exclusive(target, b"second", store.options)
    assert read_bytes(target, store.options) == b"first"
    assert list_files(join(store.root, "x"), store.options) == {"_COMMITTED": 5}  # no temporary file left


def test_upload_copies_a_local_file_whole_and_leaves_no_temporary(store: Store, tmp_path: Path) -> None:
    local = tmp_path / "env.tar.gz"
    local.write_bytes(b"packed" * 1000)
    target = join(store.root, "_python", "d.tar.gz")
    upload_file(str(local), target, store.options)
    upload_file(str(local), target, store.options)  # again: the same content, already there
    assert read_bytes(target, store.options) == local.read_bytes()
    assert list_files(store.root, store.options) == {"_python/d.tar.gz": 6000}


def test_write_replaces_whole_files_and_leaves_no_temporary(store: Store) -> None:
    target = join(store.root, "a", "b", "status.json")
    write_json(target, {"state": "running"}, store.options)
    write_json(target, {"state": "success", "rows": 3}, store.options)
    assert read_json(target, store.options) == {"state": "success", "rows": 3}
    assert list(list_files(store.root, store.options)) == ["a/b/status.json"]
    with pytest.raises(FileNotFoundError):
        read_bytes(join(store.root, "missing"), store.options)


def test_listing_removal_and_folders(store: Store) -> None:
    for name in ["f/1", "f/sub/2", "f/sub/deeper/3", "other"]:
        write_bytes(join(store.root, name), name.encode(), store.options)
    folder = join(store.root, "f")
    assert list_files(folder, store.options) == {"1": 3, "sub/2": 7, "sub/deeper/3": 14}
    assert list_folder(folder, store.options) == [("1", False), ("sub", True)]
    assert list_folder(join(store.root, "missing"), store.options) == []
    assert list_files(join(store.root, "missing"), store.options) == {}
    assert exists(join(folder, "sub"), store.options)
    assert remove(join(folder, "sub"), store.options) is True
    assert remove(join(folder, "sub"), store.options) is False
    assert list_files(folder, store.options) == {"1": 3}
    reset_folder(folder, store.options)
    assert list_files(folder, store.options) == {}
    assert read_bytes(join(store.root, "other"), store.options) == b"other"


def test_empty_folders_are_removed_only_when_empty(tmp_path: Path) -> None:
    make_folder(str(tmp_path / "a" / "b"))
    remove_empty_folder(str(tmp_path / "a"))  # not empty: kept
    assert (tmp_path / "a" / "b").is_dir()
    remove_empty_folder(str(tmp_path / "a" / "b"))
    assert not (tmp_path / "a" / "b").exists()


def test_making_a_folder_on_s3_creates_no_bucket(moto_endpoint: str) -> None:
    options = s3_options(moto_endpoint)
    make_folder("s3://bucket-that-must-not-appear/x", options)
    fs, _ = filesystem("s3://finegrained-tests", options)
    fs.invalidate_cache()
    assert "bucket-that-must-not-appear" not in fs.ls("")


def test_without_hard_links_the_local_create_is_still_exclusive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Some network mounts refuse hard links; that cannot be produced here, so the refusal is simulated.
    def no_links(self: LocalFileSystem, src: str, dst: str, **kwargs: object) -> None:
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(LocalFileSystem, "link", no_links)
    target = str(tmp_path / "m" / "_COMMITTED")
    create_exclusive(target, b"first")
    with pytest.raises(FileExistsError):
        create_exclusive(target, b"second")
    assert Path(target).read_bytes() == b"first"
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["_COMMITTED"]


@pytest.mark.parametrize(
    ("location", "match"),
    [("nosuchscheme://x/y", "not reachable through fsspec|needs an fsspec driver"), ("gs://bucket/x", "gcsfs")],
)
def test_a_filesystem_fsspec_cannot_reach_is_a_clear_error(location: str, match: str) -> None:
    with pytest.raises(StorageConfigError, match=match) as caught:
        filesystem(location)
    assert location in str(caught.value)
