"""The ready region driver's wire protocol: JSON frames, one per line, over the pool's Unix socket (pure).

A task connects to ``<pool folder>/driver.sock`` (0600, so only the pool's user can connect) and sends one
``run`` request: the pool's token (checked in constant time), the region job's JSON form
(``dataclasses.asdict(RegionJob)``), the pool's URLs, the storage root's fsspec options (a Connect
client cannot read the server's secret settings) and what the stage code would see in the task process
(``sys.path``, the environment, the working folder). The driver answers with frames:

- ``{"type": "accepted", "pid": ...}``: first, once the request checked out and a child took the region.
  The task waits for it only ``ACCEPT_TIMEOUT_S``; if it comes, the task answers ``{"op": "go"}`` and
  the child starts the region. Without ``go`` (the task gave up and runs the region itself) the child
  exits having done nothing: a driver that wakes late never touches a region its task already ran;
- ``{"type": "log", "line": ...}``: a line the region printed (the stage logs, tracebacks);
- ``{"type": "session", "id": ..., "user_id": ...}``: a Connect session about to run; the task records it
  on its lease and answers ``{"op": "recorded"}`` (or ``{"op": "refused", "error": ...}``) before the
  session runs anything;
- ``{"type": "done", "failed": stage or null, "application_id": ..., "sessions": {stage: id}}``: the end;
- ``{"type": "error", "error": ...}``: the request was refused (bad token, bad job).

The task may send ``{"op": "kill"}`` at any time (its ``on_kill``); closing its end (the task died)
makes the driver interrupt the region's Spark work and exit.
"""

from __future__ import annotations

import hmac
import json
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

SOCKET_NAME = "driver.sock"
"""The ready driver's socket in the pool's folder (bound only once the driver has imported the client)."""
MAX_FRAME_BYTES = 64 * 2**20
"""A frame longer than this is a protocol error (a region job is kilobytes; a log line rarely more)."""
PROTOCOL_VERSION = 3
"""2: ``accepted`` and ``go`` before the region starts; 3: the storage root's options (a driver of another
version refuses the request, and the task runs the region itself)."""
ACCEPT_TIMEOUT_S = 15.0
"""How long a task waits for the driver to accept its region (a fork and a JSON parse: milliseconds when well)."""


class DriverProtocolError(RuntimeError):
    """A frame that is not valid JSON, too long, or not what the protocol allows at that point."""


def encode(message: Mapping[str, Any]) -> bytes:
    """One frame: compact JSON and a newline (JSON escapes every newline inside strings)."""
    return json.dumps(message, separators=(",", ":")).encode("utf-8") + b"\n"


class FrameReader:
    """Reads frames from a socket; ``read()`` is None once the other end has closed."""

    def __init__(self, sock: socket.socket, max_bytes: int = MAX_FRAME_BYTES) -> None:
        self._sock = sock
        self._buffer = bytearray()
        self._max = max_bytes
        self._closed = False

    def read(self) -> dict[str, Any] | None:
        while True:
            end = self._buffer.find(b"\n")
            if end >= 0:
                frame = bytes(self._buffer[:end])
                del self._buffer[: end + 1]
                return decode(frame)
            if len(self._buffer) > self._max:
                raise DriverProtocolError(f"a frame longer than {self._max} bytes; allowed: up to {self._max}")
            if self._closed:
                if self._buffer:
                    raise DriverProtocolError("the connection closed in the middle of a frame")
                return None
            try:
                chunk = self._sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self._closed = True
            self._buffer += chunk


def decode(frame: bytes) -> dict[str, Any]:
    """The JSON object in one frame; DriverProtocolError if it is not one."""
    try:
        message = json.loads(frame.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise DriverProtocolError(f"a frame that is not JSON: {exc}") from None
    if not isinstance(message, dict):
        raise DriverProtocolError(f"a frame that is a JSON {type(message).__name__}, not an object")
    return message


@dataclass(frozen=True)
class RunRequest:
    """What a task asks of the ready driver: run this region job in the pool."""

    job: dict[str, Any]
    """``dataclasses.asdict(RegionJob)``."""
    url: str
    ui_url: str | None
    token: str | None = field(repr=False)
    sys_path: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict, repr=False)
    """The task's environment: the stage code sees what it would in the task process (may hold secrets)."""
    cwd: str | None = None
    storage_options: dict[str, Any] | None = field(default=None, repr=False)
    """fsspec options for the storage root (credentials inside); None: those the server's settings show."""

    def to_frame(self) -> dict[str, Any]:
        return {
            "op": "run",
            "version": PROTOCOL_VERSION,
            "token": self.token,
            "job": self.job,
            "url": self.url,
            "ui_url": self.ui_url,
            "sys_path": self.sys_path,
            "env": self.env,
            "cwd": self.cwd,
            "storage_options": self.storage_options,
        }


def parse_request(message: Mapping[str, Any], token: str | None) -> RunRequest:
    """The run request in ``message`` if its token is the pool's; DriverProtocolError naming what is wrong.

    Messages never quote a token.
    """
    if message.get("op") != "run":
        raise DriverProtocolError(f"the first frame has op {message.get('op')!r}; allowed: 'run'")
    if message.get("version") != PROTOCOL_VERSION:
        raise DriverProtocolError(
            f"protocol version {message.get('version')!r}; allowed: {PROTOCOL_VERSION} (the task's provider "
            "and the pool's differ: restart the pool)"
        )
    given = message.get("token")
    if token is not None and not (isinstance(given, str) and hmac.compare_digest(given.encode(), token.encode())):
        raise DriverProtocolError("the request's token is not the pool's")
    job, url = message.get("job"), message.get("url")
    if not isinstance(job, dict) or not isinstance(job.get("stages"), list):
        raise DriverProtocolError("the request's job is not a region job (an object with a list of stages)")
    if not isinstance(url, str) or not url.startswith("sc://"):
        raise DriverProtocolError(f"the request's url is {url!r}; allowed: an sc:// URL")
    sys_path, env = message.get("sys_path", []), message.get("env", {})
    cwd, ui_url = message.get("cwd"), message.get("ui_url")
    if not isinstance(sys_path, list) or not all(isinstance(entry, str) for entry in sys_path):
        raise DriverProtocolError("the request's sys_path is not a list of strings")
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        raise DriverProtocolError("the request's env is not an object of strings")
    if cwd is not None and not isinstance(cwd, str):
        raise DriverProtocolError("the request's cwd is not a string")
    if ui_url is not None and not isinstance(ui_url, str):
        raise DriverProtocolError("the request's ui_url is not a string")
    storage = message.get("storage_options")
    if storage is not None and not isinstance(storage, dict):
        raise DriverProtocolError("the request's storage_options is not an object")
    token_given = given if isinstance(given, str) else None
    return RunRequest(job, url, ui_url, token_given, sys_path, env, cwd, storage)


@dataclass(frozen=True)
class DriverOutcome:
    """How a region ended in the ready driver."""

    failed: str | None
    """The stage that failed, or None."""
    application_id: str
    sessions: dict[str, str]
    complete: bool = True
    """False when the driver ended without its ``done`` frame (it died): the stages' status files say the rest."""
    error: str | None = None


def parse_done(message: Mapping[str, Any]) -> DriverOutcome:
    failed = message.get("failed")
    sessions = message.get("sessions") or {}
    if failed is not None and not isinstance(failed, str):
        raise DriverProtocolError(f"done frame with failed={failed!r}; allowed: a stage name or null")
    if not isinstance(sessions, dict):
        raise DriverProtocolError("done frame whose sessions are not an object")
    return DriverOutcome(
        failed=failed,
        application_id=str(message.get("application_id") or ""),
        sessions={str(k): str(v) for k, v in sessions.items()},
    )
