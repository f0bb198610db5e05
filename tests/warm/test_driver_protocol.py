"""The ready region driver's protocol pieces, without Spark: frames, requests, the client, the socket's lock."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil
import pytest

from airflow_provider_finegrained.warm.driver_client import (
    DriverRefused,
    DriverUnavailable,
    ReadyDriver,
    request_for,
    unavailable_reason,
)
from airflow_provider_finegrained.warm.driver_protocol import (
    SOCKET_NAME,
    DriverProtocolError,
    FrameReader,
    RunRequest,
    decode,
    encode,
    parse_done,
    parse_request,
)
from airflow_provider_finegrained.warm.state import WarmPool
from tests.warm.conftest import wait_until

TOKEN = "pool-token-not-for-messages-31337"
JOB = {"region": "r", "stages": []}


def request(**changes: Any) -> dict[str, Any]:
    frame = RunRequest(JOB, "sc://127.0.0.1:15002", None, TOKEN, ["/dags"], {"A": "1"}, "/tmp").to_frame()
    frame.update(changes)
    return frame


@pytest.mark.parametrize(
    "message",
    [{"type": "log", "line": "two\nlines"}, {"op": "kill"}, {"type": "done", "failed": None, "sessions": {"a": "s"}}],
)
def test_a_frame_is_one_line_and_decodes_to_what_was_sent(message: dict[str, Any]) -> None:
    frame = encode(message)
    assert frame.endswith(b"\n") and frame.count(b"\n") == 1
    assert decode(frame[:-1]) == message


@pytest.mark.parametrize(
    ("frame", "error"),
    [(b"{not json", "not JSON"), (b"[1, 2]", "a JSON list, not an object"), (b"\xff", "not JSON")],
)
def test_a_frame_that_is_not_a_json_object_is_a_protocol_error(frame: bytes, error: str) -> None:
    with pytest.raises(DriverProtocolError, match=error):
        decode(frame)


def test_the_reader_splits_and_joins_chunks_and_sees_the_end() -> None:
    left, right = socket.socketpair()
    with left, right:
        reader = FrameReader(right)
        left.sendall(encode({"n": 1}) + encode({"n": 2})[:4])
        assert reader.read() == {"n": 1}
        left.sendall(encode({"n": 2})[4:])
        assert reader.read() == {"n": 2}
        left.sendall(b'{"half": ')
        left.shutdown(socket.SHUT_WR)
        with pytest.raises(DriverProtocolError, match="closed in the middle of a frame"):
            reader.read()


def test_the_reader_refuses_an_endless_frame_and_returns_none_at_a_clean_end() -> None:
    left, right = socket.socketpair()
    with left, right:
        left.sendall(b"x" * 100)
        with pytest.raises(DriverProtocolError, match="longer than 64 bytes"):
            FrameReader(right, max_bytes=64).read()
    left, right = socket.socketpair()
    with left, right:
        left.close()
        assert FrameReader(right).read() is None


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"op": "stop"}, "op 'stop'; allowed: 'run'"),
        ({"version": 0}, "protocol version 0; allowed: 3"),
        ({"token": "wrong"}, "token is not the pool's"),
        ({"token": None}, "token is not the pool's"),
        ({"job": {"region": "r"}}, "job is not a region job"),
        ({"url": "http://127.0.0.1:15002"}, "url is 'http://127.0.0.1:15002'; allowed: an sc:// URL"),
        ({"sys_path": [1]}, "sys_path is not a list of strings"),
        ({"env": {"A": 1}}, "env is not an object of strings"),
        ({"cwd": 3}, "cwd is not a string"),
        ({"storage_options": "key=secret"}, "storage_options is not an object"),
    ],
)
@pytest.mark.security
def test_a_bad_request_is_refused_naming_what_is_wrong_and_never_the_token(changes: dict[str, Any], error: str) -> None:
    with pytest.raises(DriverProtocolError, match=error) as refused:
        parse_request(request(**changes), TOKEN)
    assert TOKEN not in str(refused.value)


def test_a_good_request_parses_and_its_repr_shows_no_token_environment_or_storage_options() -> None:
    storage = {"key": "access", "secret": "storage-secret", "client_kwargs": {"region_name": "eu-west-1"}}
    parsed = parse_request(request(env={"AWS_SECRET_ACCESS_KEY": "env-secret"}, storage_options=storage), TOKEN)
    assert (parsed.job, parsed.url, parsed.sys_path, parsed.cwd) == (JOB, "sc://127.0.0.1:15002", ["/dags"], "/tmp")
    assert parsed.storage_options == storage
    assert TOKEN not in repr(parsed) and "env-secret" not in repr(parsed) and "storage-secret" not in repr(parsed)
    assert parse_request(request(), TOKEN).storage_options is None


@pytest.mark.parametrize(
    ("message", "failed", "sessions"),
    [
        ({"type": "done", "failed": None, "application_id": "local-1", "sessions": {"a": "s1"}}, None, {"a": "s1"}),
        ({"type": "done", "failed": "b", "sessions": None}, "b", {}),
    ],
)
def test_done_frames(message: dict[str, Any], failed: str | None, sessions: dict[str, str]) -> None:
    outcome = parse_done(message)
    assert (outcome.failed, outcome.sessions, outcome.complete) == (failed, sessions, True)
    with pytest.raises(DriverProtocolError, match="failed=3"):
        parse_done({**message, "failed": 3})


def pool(folder: str | None) -> WarmPool:
    return WarmPool("sc://127.0.0.1:15002", folder, None, None, None, 0.0, token=TOKEN)


def test_why_a_pool_has_no_ready_driver(tmp_path: Path) -> None:
    assert "external server" in str(unavailable_reason(pool(None)))
    assert "not listening" in str(unavailable_reason(pool(str(tmp_path))))
    deep = tmp_path / ("d" * 120)
    assert "too long a path for a Unix socket" in str(unavailable_reason(pool(str(deep))))
    with pytest.raises(DriverUnavailable, match="the pool's ready driver is not listening"):
        ReadyDriver.connect(pool(str(tmp_path)))
    (tmp_path / SOCKET_NAME).touch()  # a file left behind, nobody listening: the task runs the region itself
    assert unavailable_reason(pool(str(tmp_path))) is None
    with pytest.raises(DriverUnavailable, match=r"did not take the connection .*Connection refused"):
        ReadyDriver.connect(pool(str(tmp_path)))


def test_a_driver_that_takes_the_connection_but_never_accepts_the_region_is_given_up_on(tmp_path: Path) -> None:
    # A stopped or stuck driver: the kernel still queues the connection (the backlog), nobody answers.
    with socket.socket(socket.AF_UNIX) as listener:
        listener.bind(str(tmp_path / SOCKET_NAME))
        listener.listen(1)
        driver = ReadyDriver.connect(pool(str(tmp_path)))
        try:
            with pytest.raises(DriverRefused, match=r"^it did not accept the region within 0.3 s$"):
                driver.run(request_for(JOB, pool(None)), lambda *_: None, print, accept_timeout_s=0.3)
        finally:
            driver.close()


@pytest.fixture
def fake_driver() -> Iterator[Callable[[list[dict[str, Any]]], tuple[ReadyDriver, list[dict[str, Any]]]]]:
    """A ReadyDriver whose other end sends scripted frames and collects what the client answers."""
    ends: list[socket.socket] = []

    def start(script: list[dict[str, Any]]) -> tuple[ReadyDriver, list[dict[str, Any]]]:
        client, driver = socket.socketpair()
        ends.extend((client, driver))
        received: list[dict[str, Any]] = []

        def play() -> None:
            reader = FrameReader(driver)
            received.append(reader.read() or {})
            if script and script[0].get("type") != "error":
                driver.sendall(encode({"type": "accepted", "pid": 4242}))
                received.append(reader.read() or {})  # the task's go
            for frame in script:
                driver.sendall(encode(frame))
                if frame.get("type") == "session":
                    received.append(reader.read() or {})
            driver.close()

        threading.Thread(target=play, daemon=True).start()
        return ReadyDriver(client), received

    yield start
    for end in ends:
        end.close()


def test_the_client_echoes_lines_records_sessions_and_returns_the_outcome(fake_driver: Any) -> None:
    script = [
        {"type": "log", "line": "[finegrained] stage a: started"},
        {"type": "session", "id": "s1", "user_id": "u"},
        {"type": "session", "id": "s2", "user_id": None},
        {"type": "done", "failed": None, "application_id": "local-1", "sessions": {"a": "s1"}},
    ]
    driver, received = fake_driver(script)
    lines: list[str] = []
    recorded: list[tuple[str, str | None]] = []

    def record(session: str, user: str | None) -> None:
        if session == "s2":
            raise RuntimeError("the lease expired")
        recorded.append((session, user))

    # The pool carries the storage root's options: the driver's Connect sessions cannot read the secret ones.
    storage = {"key": "access", "secret": "storage-secret"}
    outcome = driver.run(request_for(JOB, replace(pool(None), storage_options=storage)), record, lines.append)
    assert (outcome.failed, outcome.application_id, outcome.sessions) == (None, "local-1", {"a": "s1"})
    assert lines == ["[finegrained] stage a: started"] and recorded == [("s1", "u")]
    assert received[0]["op"] == "run" and received[0]["token"] == TOKEN and received[0]["env"] == dict(os.environ)
    assert received[0]["storage_options"] == storage
    assert received[1:] == [
        {"op": "go"},
        {"op": "recorded"},
        {"op": "refused", "error": "RuntimeError: the lease expired"},
    ]


def test_a_refusal_raises_and_a_driver_that_dies_is_an_incomplete_outcome(fake_driver: Any) -> None:
    driver, _ = fake_driver([{"type": "error", "error": "the request's token is not the pool's"}])
    with pytest.raises(DriverRefused, match="token is not the pool's"):
        driver.run(request_for(JOB, pool(None)), lambda *_: None, print)
    driver, _ = fake_driver([])  # hangs up without a word: nothing ran, the task runs the region itself
    with pytest.raises(DriverRefused, match="it hung up before accepting the region"):
        driver.run(request_for(JOB, pool(None)), lambda *_: None, print)
    driver, _ = fake_driver([{"type": "log", "line": "x"}])
    outcome = driver.run(request_for(JOB, pool(None)), lambda *_: None, lambda line: None)
    assert not outcome.complete and "ended without reporting the region" in str(outcome.error)


REGION_JOB = {
    "region": "r",
    "dag_id": "d",
    "run_id": "m",
    "try_number": 1,
    "storage_root": "/nonexistent",
    "folder": "/nonexistent",
    "stages": [],
}

SERVE = """
import sys
from airflow_provider_finegrained.warm.region_driver import serve
serve(sys.argv[1], "sc://127.0.0.1:1", sys.stdin.readline().strip())
"""


@pytest.mark.security
def test_the_driver_socket_is_owner_only_and_refuses_a_wrong_token_or_job(tmp_path: Path) -> None:
    folder = str(tmp_path)
    server = subprocess.Popen([sys.executable, "-c", SERVE, folder], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert server.stdin is not None
    server.stdin.write(f"{TOKEN}\n".encode())
    server.stdin.close()
    try:
        path = tmp_path / SOCKET_NAME
        wait_until(path.exists, 60, "the driver's socket")
        assert stat.S_IMODE(path.stat().st_mode) == 0o600

        def answer(frame: dict[str, Any]) -> dict[str, Any] | None:
            with socket.socket(socket.AF_UNIX) as sock:
                sock.connect(str(path))
                sock.sendall(encode(frame))
                return FrameReader(sock).read()

        assert answer(request(token="not-the-token")) == {
            "type": "error",
            "error": "the request's token is not the pool's",
        }
        bad_job = answer(request(job={"region": "r", "stages": [{"name": "a"}]}))
        assert bad_job is not None and "the request's job is not a region job" in bad_job["error"]
        old = answer(request(version=1))  # a task of another provider version: refused, naming the fix
        assert (
            old is not None and "protocol version 1; allowed: 3" in old["error"] and "restart the pool" in old["error"]
        )
        # A good request: a child takes it and says so first, with its pid. Without the task's go (this one
        # hangs up, as a task that gave up on the driver does) the child exits having run nothing.
        accepted = answer(request(job=REGION_JOB))
        assert accepted is not None and accepted["type"] == "accepted" and accepted["pid"] != server.pid
        wait_until(lambda: not psutil.pid_exists(accepted["pid"]), 10, "the child without a go to exit")
    finally:
        server.kill()
        server.wait()


LISTENING = """
import sys
from airflow_provider_finegrained.warm.health import check_health
check_health(sys.argv[1], 5.0, query=False)
print("grpc imported:", "grpc" in sys.modules)
"""


def test_a_running_pools_check_is_a_port_check_without_grpc() -> None:
    from airflow_provider_finegrained.warm import WarmPoolUnavailable

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        url = f"sc://127.0.0.1:{listener.getsockname()[1]}"
        done = subprocess.run([sys.executable, "-c", LISTENING, url], capture_output=True, text=True, check=True)
        assert done.stdout.strip() == "grpc imported: False"
    with pytest.raises(WarmPoolUnavailable, match=rf"server at {url} is unreachable: no connection to 127.0.0.1"):
        subprocess_free_check(url)


def subprocess_free_check(url: str) -> None:
    from airflow_provider_finegrained.warm.health import check_health

    check_health(url, 2.0, query=False)
