"""Storage roots the storage tests run on: a local folder, fsspec's memory filesystem, and a real S3 API.

The S3 API is moto in server mode on 127.0.0.1 (a free port), started once per session and reached
through s3fs over HTTP, as any S3-compatible store would be.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_finegrained.storage.filesystem import remove

S3_BUCKET = "finegrained-tests"
S3_SECRET = "moto-secret-key-not-for-logs"


@dataclass(frozen=True)
class Store:
    """A storage root and the fsspec options that reach it."""

    kind: str
    root: str
    options: dict[str, Any] = field(default_factory=dict)


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """The URL of a moto S3 server on loopback, with one bucket, for the whole session."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        import s3fs

        s3fs.S3FileSystem(**s3_options(endpoint)).mkdir(S3_BUCKET)
        yield endpoint
    finally:
        server.stop()


def s3_options(endpoint: str) -> dict[str, Any]:
    """s3fs options for the moto server: static keys, its endpoint, a region."""
    return {
        "key": "moto-access-key",
        "secret": S3_SECRET,
        "endpoint_url": endpoint,
        "client_kwargs": {"region_name": "eu-west-1"},
    }


@pytest.fixture(params=["local", "memory", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """A fresh, empty root on each kind of storage (the same test runs on all three)."""
    unique = uuid.uuid4().hex[:12]
    if request.param == "local":
        yield Store("local", str(tmp_path / "storage"))
    elif request.param == "memory":
        root = f"memory://fg-tests/{unique}"
        yield Store("memory", root)
        remove(root)  # the memory filesystem lives as long as the process
    else:
        endpoint = request.getfixturevalue("moto_endpoint")
        yield Store("s3", f"s3://{S3_BUCKET}/{unique}", s3_options(endpoint))
