"""Fixtures of the hook tests: a real S3 API (moto in server mode on loopback) for storage credentials."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module")
def moto_endpoint() -> Iterator[str]:
    """The URL of a moto S3 server on 127.0.0.1 (a free port), for one test module."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()
