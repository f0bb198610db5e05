"""The storage probe test_connection runs: a real write, read and delete under the root."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_finegrained.storage.filesystem import list_files
from airflow_provider_finegrained.storage.probe import StorageProbeError, probe
from tests.storage.conftest import S3_SECRET, Store, s3_options


def test_probe_writes_reads_and_deletes(store: Store) -> None:
    message = probe(store.root, store.options)
    assert message.startswith(f"storage_root {store.root}: wrote, read back and deleted a ")
    assert list_files(store.root, store.options) == {}  # nothing left behind


def test_probe_of_a_missing_bucket_names_the_root_and_the_step(moto_endpoint: str) -> None:
    root = "s3://no-such-bucket-fg/prefix"
    with pytest.raises(StorageProbeError) as caught:
        probe(root, s3_options(moto_endpoint))
    message = str(caught.value)
    assert message.startswith(f"storage_root {root!r}: could not write a test object at {root}/_finegrained-probe-")
    assert "does the bucket or container exist?" in message
    assert S3_SECRET not in message


def test_probe_of_an_unwritable_local_root(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("a file where the root's folder should be")
    root = str(blocker / "storage")
    with pytest.raises(StorageProbeError, match=rf"storage_root '{root}': could not create the folder for a test"):
        probe(root)


@pytest.mark.parametrize(
    ("root", "match"),
    [
        ("relative/path", "storage_root 'relative/path' must be an absolute path or a URL"),
        ("s3://key:hunter2@bucket/x", r"storage_root 's3://key:\*\*\*@bucket/x' carries a password"),
        ("s3:///prefix-without-bucket", "names no bucket"),
    ],
)
def test_probe_of_an_unusable_root(root: str, match: str) -> None:
    with pytest.raises(StorageProbeError, match=match) as caught:
        probe(root)
    assert "hunter2" not in str(caught.value)
