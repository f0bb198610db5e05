"""The task's side of the ready region driver: hand a region job to the pool's driver and follow it.

Nothing here imports pyspark: avoiding that import in the task process is why the driver exists.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any

from airflow_provider_finegrained.warm.driver_protocol import (
    SOCKET_NAME,
    DriverOutcome,
    DriverProtocolError,
    FrameReader,
    RunRequest,
    encode,
    parse_done,
)
from airflow_provider_finegrained.warm.state import WarmPool

SessionRecorder = Callable[[str, "str | None"], None]
MAX_SOCKET_PATH = 107
"""Linux's limit on a Unix socket's path (``sun_path`` is 108 bytes with its terminating NUL)."""


class DriverRefused(RuntimeError):
    """The ready driver refused the request before running anything (another provider version, another token)."""


def socket_path(pool: WarmPool) -> str | None:
    """Where the pool's ready driver listens; None for an external pool (no folder on this machine)."""
    if pool.folder is None:
        return None
    return os.path.join(pool.folder, SOCKET_NAME)


def unavailable_reason(pool: WarmPool) -> str | None:
    """Why the pool has no ready driver for this task, or None when its socket is there."""
    path = socket_path(pool)
    if path is None:
        return "the pool is an external server (a ready driver runs only beside a pool this provider started)"
    if len(path.encode()) > MAX_SOCKET_PATH:
        return (
            f"the pool's folder is too long a path for a Unix socket ({len(path.encode())} > {MAX_SOCKET_PATH} bytes)"
        )
    if not os.path.exists(path):
        return "the pool's ready driver is not listening (still importing, disabled, or stopped)"
    return None


class ReadyDriver:
    """One region handed to the pool's ready driver (one connection, one forked child there)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        # Reentrant: Airflow calls on_kill (which sends ``kill``) from a signal handler in the thread that may
        # be sending a reply at that moment; a handler runs between bytecodes, so frames stay whole.
        self._send_lock = threading.RLock()
        self._closed = False

    @classmethod
    def connect(cls, pool: WarmPool, timeout_s: float = 5.0) -> ReadyDriver | None:
        """A connection to the pool's ready driver, or None when there is none to connect to."""
        path = socket_path(pool)
        if path is None or unavailable_reason(pool) is not None:
            return None
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout_s)
        try:
            sock.connect(path)
        except OSError:
            sock.close()
            return None  # a socket left by a driver that died: the caller runs the region itself
        sock.settimeout(None)
        return cls(sock)

    def send(self, message: Mapping[str, Any]) -> None:
        with self._send_lock:
            if not self._closed:
                self._sock.sendall(encode(message))

    def run(
        self,
        request: RunRequest,
        record_session: SessionRecorder,
        echo: Callable[[str], None],
    ) -> DriverOutcome:
        """Send ``request``, echo the region's lines, record its sessions; the outcome once it ends.

        Raises DriverRefused if the driver refused the request (nothing ran).
        """
        self.send(request.to_frame())
        reader = FrameReader(self._sock)
        while True:
            try:
                message = reader.read()
            except (DriverProtocolError, OSError) as exc:
                return DriverOutcome(None, "", {}, complete=False, error=f"the ready driver's stream broke: {exc}")
            if message is None:
                return DriverOutcome(
                    None, "", {}, complete=False, error="the ready driver's child ended without reporting the region"
                )
            kind = message.get("type")
            if kind == "log":
                echo(str(message.get("line", "")))
            elif kind == "session":
                self._record(message, record_session)
            elif kind == "done":
                return parse_done(message)
            elif kind == "error":
                raise DriverRefused(str(message.get("error")))

    def _record(self, message: Mapping[str, Any], record_session: SessionRecorder) -> None:
        user_id = message.get("user_id")
        try:
            record_session(str(message["id"]), None if user_id is None else str(user_id))
        except Exception as exc:  # the lease expired: the session must not run
            self.send({"op": "refused", "error": f"{type(exc).__name__}: {exc}"})
        else:
            self.send({"op": "recorded"})

    def kill(self) -> None:
        """Ask the driver to interrupt the region's Spark work (the stages report as interrupted)."""
        with contextlib.suppress(OSError):
            self.send({"op": "kill"})

    def close(self) -> None:
        """Hang up: a child still running takes this as the task's death, interrupts and exits."""
        with self._send_lock:
            self._closed = True
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._sock.close()


def request_for(job: dict[str, Any], pool: WarmPool) -> RunRequest:
    """The run request for ``job`` in ``pool``, carrying what the stage code would see in this process."""
    return RunRequest(
        job=job,
        url=pool.url,
        ui_url=pool.ui_url,
        token=pool.token,
        sys_path=[entry for entry in sys.path if entry],
        env=dict(os.environ),
        cwd=os.getcwd(),
    )
