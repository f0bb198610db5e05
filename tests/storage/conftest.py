"""Storage roots the storage tests run on: a local folder, fsspec's memory filesystem, and a real S3 API.

The S3 API is moto in server mode on 127.0.0.1 (tests/conftest.py's ``moto_endpoint``, one per
session), reached through s3fs over HTTP, as any S3-compatible store would be.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_finegrained.storage.filesystem import remove
from tests.conftest import S3_BUCKET, S3_SECRET, s3_options

__all__ = ["S3_BUCKET", "S3_SECRET", "Store", "s3_options"]


@dataclass(frozen=True)
class Store:
    """A storage root and the fsspec options that reach it."""

    kind: str
    root: str
    options: dict[str, Any] = field(default_factory=dict)


@pytest.fixture(params=["local", "memory", "s3", pytest.param("hdfs", marks=pytest.mark.hadoop)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh, empty root on each kind of storage (the same test runs on all four).

    ``hdfs`` is the session's loopback Hadoop cluster, reached over WebHDFS (storage/hdfs.py)."""
    unique = uuid.uuid4().hex[:12]
    if request.param == "local":
        yield Store("local", str(tmp_path / "storage"))
    elif request.param == "memory":
        root = f"memory://fg-tests/{unique}"
        yield Store("memory", root)
        remove(root)  # the memory filesystem lives as long as the process
    elif request.param == "hdfs":
        cluster = request.getfixturevalue("hadoop_cluster")
        root = cluster.storage_root(f"/storage-tests/{unique}")
        options = {"webhdfs_url": cluster.namenode_http_url}
        yield Store("hdfs", root, options)
        remove(root, options)
    else:
        endpoint = request.getfixturevalue("moto_endpoint")
        yield Store("s3", f"s3://{S3_BUCKET}/{unique}", s3_options(endpoint))
