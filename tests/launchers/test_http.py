"""The one HTTP client against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest

from airflow_provider_finegrained.launchers.http import (
    HttpRequest,
    HttpRequestError,
    get_json,
    redact_url,
    send,
)
from tests.loopback_http import serving


class Script:
    """What the server answers, in order, per path; what it received."""

    def __init__(self) -> None:
        self.answers: dict[str, list[tuple[int, Any]]] = {}
        self.received: list[tuple[str, str, str, dict[str, str]]] = []
        self.delay_s = 0.0


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    script = Script()

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode("utf-8") if length else ""
            script.received.append((self.command, self.path, body, dict(self.headers)))
            time.sleep(script.delay_s)
            queue = script.answers.get(self.path.split("?")[0]) or [(404, {"error": "not found"})]
            status, payload = queue.pop(0) if len(queue) > 1 else queue[0]
            data = payload if isinstance(payload, bytes) else json.dumps(payload).encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_PUT = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    with serving(Handler) as url:
        yield url, script


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_get_json_decodes_and_sends_accept_json(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers["/json/"] = [(200, {"status": "ALIVE"})]
    assert get_json(f"{url}/json/") == {"status": "ALIVE"}
    method, path, _, headers = script.received[0]
    assert (method, path, headers["Accept"]) == ("GET", "/json/", "application/json")


def test_idempotent_requests_are_retried_on_503(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers["/ws"] = [(503, {"e": 1}), (503, {"e": 2}), (200, {"ok": True})]
    assert get_json(f"{url}/ws") == {"ok": True}
    assert len(script.received) == 3
    script.answers["/state"] = [(503, {}), (200, {"state": "KILLED"})]
    answer = send(HttpRequest("PUT", f"{url}/state", body='{"state": "KILLED"}'))
    assert (answer.status, answer.json()) == (200, {"state": "KILLED"})
    assert [r[:3] for r in script.received[3:]] == [("PUT", "/state", '{"state": "KILLED"}')] * 2


def test_retries_end_with_the_last_answer(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers["/ws"] = [(503, {"busy": True})]
    assert send(HttpRequest("GET", f"{url}/ws"), retries=1).status == 503
    assert len(script.received) == 2
    with pytest.raises(HttpRequestError, match=r"GET .*/ws answered HTTP 503"):
        get_json(f"{url}/ws", retries=0)


def test_post_is_never_retried(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers["/submit"] = [(503, {}), (200, {})]
    assert send(HttpRequest("POST", f"{url}/submit", body="x")).status == 503
    assert len(script.received) == 1


def test_error_statuses_are_responses_and_bad_json_an_error(server: tuple[str, Script]) -> None:
    url, script = server
    assert send(HttpRequest("GET", f"{url}/missing")).status == 404
    script.answers["/html"] = [(200, b"<html>not json</html>")]
    with pytest.raises(HttpRequestError, match=r"answered no JSON"):
        get_json(f"{url}/html")


def test_timeout_is_an_error_naming_the_request(server: tuple[str, Script]) -> None:
    url, script = server
    script.answers["/slow"] = [(200, {})]
    script.delay_s = 1.0
    clock = time.monotonic()
    with pytest.raises(HttpRequestError, match=r"GET .*/slow failed: (ReadTimeout|ConnectionError)"):
        get_json(f"{url}/slow", timeout_s=0.2, retries=0)
    assert time.monotonic() - clock < 1.0


def test_unreachable_server_error_hides_the_password() -> None:
    port = _closed_port()
    clock = time.monotonic()
    with pytest.raises(HttpRequestError) as caught:
        get_json(f"http://admin:s3cret@127.0.0.1:{port}/json/", timeout_s=1, retries=1)
    message = str(caught.value)
    assert "s3cret" not in message
    assert message.startswith(f"GET http://admin:***@127.0.0.1:{port}/json/ failed: ConnectionError")
    assert caught.value.__cause__ is None and caught.value.__suppress_context__
    assert time.monotonic() - clock < 5


def test_loopback_ignores_proxies_from_the_environment(
    server: tuple[str, Script], monkeypatch: pytest.MonkeyPatch
) -> None:
    url, script = server
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.setenv("NO_PROXY", "")
    script.answers["/json/"] = [(200, {"ok": 1})]
    assert get_json(f"{url}/json/", retries=0) == {"ok": 1}


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://rm:8088/ws", "http://rm:8088/ws"),
        ("http://admin:s3cret@rm:8088/ws", "http://admin:***@rm:8088/ws"),
        ("https://u:p%40ss@[::1]:443/x?q=1", "https://u:***@[::1]:443/x?q=1"),
        ("http://user@rm/ws", "http://user@rm/ws"),
        ("http://rm:8088/ws?user.name=etl&token=abc", "http://rm:8088/ws?user.name=etl&token=***"),
    ],
)
def test_redact_url(url: str, shown: str) -> None:
    assert redact_url(url) == shown


@pytest.mark.security
def test_errors_hide_secret_query_parameters(server: tuple[str, Script]) -> None:
    url, _script = server
    with pytest.raises(HttpRequestError) as caught:
        get_json(f"{url}/missing?delegation_token=s3cret", retries=0)
    assert "s3cret" not in str(caught.value)
    assert f"GET {url}/missing?delegation_token=*** answered HTTP 404" in str(caught.value)


def test_the_reason_is_the_short_cause_without_the_request(server: tuple[str, Script]) -> None:
    url, script = server
    port = _closed_port()
    with pytest.raises(HttpRequestError) as refused:
        get_json(f"http://admin:s3cret@127.0.0.1:{port}/json/", timeout_s=1, retries=0)
    assert refused.value.reason == "[Errno 111] Connection refused"
    script.delay_s = 1.0
    with pytest.raises(HttpRequestError) as slow:
        get_json(f"{url}/slow", timeout_s=0.2, retries=0)
    assert slow.value.reason == "timed out"
    script.delay_s = 0.0
    with pytest.raises(HttpRequestError) as missing:
        get_json(f"{url}/missing?token=s3cret", retries=0)
    assert missing.value.reason == "HTTP 404"
    script.answers["/html"] = [(200, b"<html>")]
    with pytest.raises(HttpRequestError) as html:
        get_json(f"{url}/html")
    assert html.value.reason.startswith("no JSON (Expecting value")
    assert HttpRequestError("YARN refused the kill").reason == "YARN refused the kill"
