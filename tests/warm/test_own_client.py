"""The documented client path against a real pool (the session's shared pool of the embedded default):
``warm start`` prints the URL, the client reads the token file and connects (the snippet in docs/warm.md,
run as written); a wrong or missing token is refused at once; the pool's port is held on ``::1``.
"""

from __future__ import annotations

import errno
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from airflow_provider_finegrained import warm
from airflow_provider_finegrained.warm.auth import TOKEN_ENV, TOKEN_FILE
from tests.conftest import REPO, embedded_settings

pytestmark = [pytest.mark.slow, pytest.mark.security]

CLIENT_WAIT_S = 120.0
"""The bound on a client's run (a pyspark import and one session): a client that hangs fails the test."""


def documented_snippet(url: str, folder: str) -> str:
    """The client block of docs/warm.md, with the pool's URL and folder filled in."""
    text = (REPO / "docs" / "warm.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- client-snippet:[^\n]*-->\n```python\n(.*?)```", text, re.DOTALL)
    assert found, "docs/warm.md has no client snippet"
    code = found.group(1)
    assert 'url = "sc://localhost:PORT"' in code and 'folder = Path("F")' in code
    return code.replace('"sc://localhost:PORT"', repr(url)).replace('Path("F")', f"Path({folder!r})")


def run_client(code: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``code`` as a fresh Python process with no Connect token or URL in its environment."""
    env = {k: v for k, v in os.environ.items() if k not in (TOKEN_ENV, "SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED")}
    began = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=CLIENT_WAIT_S, check=False
    )
    return done, time.monotonic() - began


@pytest.fixture(scope="module")
def pool(warm_pool_folder: str) -> warm.WarmPool:
    return warm.ensure_started(embedded_settings(), warm_pool_folder)


def test_warm_start_prints_the_url_the_documented_client_connects_to_with_the_token(pool: warm.WarmPool) -> None:
    assert pool.folder is not None and pool.token is not None
    started = subprocess.run(
        [sys.executable, "-m", "airflow_provider_finegrained", "warm", "start", "--dir", pool.folder],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=CLIENT_WAIT_S,
        check=False,
    )
    assert started.returncode == 0, started.stderr[-3000:]
    url = started.stdout.strip().splitlines()[-1]  # after the hook's log line, if any
    assert url == pool.url and urlsplit(url).hostname == "localhost"
    assert pool.token not in started.stdout + started.stderr
    assert os.path.join(pool.folder, TOKEN_FILE) in started.stderr
    done, _ = run_client(documented_snippet(url, pool.folder))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "3"


def test_the_client_url_flag_prints_a_url_that_connects(pool: warm.WarmPool) -> None:
    assert pool.folder is not None and pool.token is not None
    started = subprocess.run(
        [sys.executable, "-m", "airflow_provider_finegrained", "warm", "start", "--dir", pool.folder, "--client-url"],
        capture_output=True,
        text=True,
        env=dict(os.environ),
        timeout=CLIENT_WAIT_S,
        check=False,
    )
    assert started.returncode == 0, started.stderr[-3000:]
    secret_url = started.stdout.strip().splitlines()[-1]
    assert secret_url == f"{pool.url}/;token={pool.token}"
    code = (
        "from pyspark.sql import SparkSession\n"
        f"spark = SparkSession.builder.remote({secret_url!r}).create()\n"
        "print(spark.range(3).count())\n"
        "spark.stop()\n"
    )
    done, _ = run_client(code)
    assert done.returncode == 0 and done.stdout.strip().splitlines()[-1] == "3", done.stderr[-3000:]


@pytest.mark.parametrize(
    ("token", "refusal"),
    [("not-the-token", "Invalid authentication token"), (None, "No authentication token provided")],
)
def test_a_wrong_or_missing_token_is_refused_at_once_with_a_clear_error(
    pool: warm.WarmPool, tmp_path: Path, token: str | None, refusal: str
) -> None:
    # The documented client, reading a token file that holds the wrong token (or a URL without one).
    assert pool.folder is not None and pool.token is not None
    code = documented_snippet(pool.url, str(tmp_path))
    if token is None:
        code = code.replace('f"{url}/;token={token}"', "url")
    (tmp_path / TOKEN_FILE).write_text(token or "unused", encoding="utf-8")
    done, took = run_client(code)
    assert done.returncode != 0
    assert refusal in done.stderr and "UNAUTHENTICATED" in done.stderr, done.stderr[-3000:]
    assert pool.token not in done.stdout + done.stderr
    # A pyspark import and one refused request; no retries (a TLS mismatch would retry for minutes).
    assert took < 60, f"refused after {took:.0f} s"


def test_a_pool_that_is_not_running_fails_the_documented_client_at_once(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    (tmp_path / TOKEN_FILE).write_text("whatever", encoding="utf-8")
    done, took = run_client(documented_snippet(f"sc://localhost:{port}", str(tmp_path)))
    assert done.returncode != 0 and "ConnectionRefusedError" in done.stderr, done.stderr[-3000:]
    assert took < 60


def test_the_pools_port_is_held_on_ipv6_loopback(pool: warm.WarmPool) -> None:
    assert pool.folder is not None
    port = urlsplit(pool.url).port
    try:
        probe = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
    except OSError:
        pytest.skip("no IPv6 here: nothing can listen on ::1")
    with probe, pytest.raises(OSError) as taken:
        probe.bind(("::1", port))
    if taken.value.errno == errno.EADDRNOTAVAIL:
        pytest.skip("no IPv6 loopback here: nothing can listen on ::1")
    assert taken.value.errno == errno.EADDRINUSE
    # A socket bound without listening is in no table psutil or ss read: the bind failing is the proof; the
    # semantics (refused there, the client goes on to 127.0.0.1) are tests/warm/test_pool_url.py's.
    assert pool.url == f"sc://localhost:{port}"
