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
    ACCEPT_TIMEOUT_S,
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
    """The ready driver did not take the region, and nothing ran: it refused the request (another provider
    version, another token), hung up, or did not accept it in time. The task runs the region itself."""


class DriverUnavailable(RuntimeError):
    """No ready driver to hand the region to (the message says why); the task runs the region itself."""


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
        self._reader: FrameReader | None = None

    @classmethod
    def connect(cls, pool: WarmPool, timeout_s: float = 5.0) -> ReadyDriver:
        """A connection to the pool's ready driver; DriverUnavailable saying why there is none."""
        path = socket_path(pool)
        reason = unavailable_reason(pool)
        if path is None or reason is not None:
            raise DriverUnavailable(reason or "the pool has no folder")
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(timeout_s)  # a full backlog (a driver that stopped accepting) blocks connect
        try:
            sock.connect(path)
        except OSError as exc:
            sock.close()
            # A socket left by a driver that died, or one that stopped accepting.
            raise DriverUnavailable(f"the pool's ready driver did not take the connection ({exc})") from None
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
        accept_timeout_s: float | None = None,
    ) -> DriverOutcome:
        """``start`` then ``follow``: the region's outcome once it ends (DriverRefused if nothing ran)."""
        self.start(request, accept_timeout_s)
        return self.follow(record_session, echo)

    def start(self, request: RunRequest, accept_timeout_s: float | None = None) -> int:
        """Send ``request``; the pid of the driver's child that accepted it.

        Raises DriverRefused (nothing ran) if the driver refuses it, hangs up, or does not accept it
        within ``accept_timeout_s`` (default ``ACCEPT_TIMEOUT_S``): a driver that hangs (stopped, stuck,
        its backlog never served) must cost a task seconds, not the region.
        """
        if accept_timeout_s is None:
            accept_timeout_s = ACCEPT_TIMEOUT_S
        self._reader = FrameReader(self._sock)
        try:
            self._sock.settimeout(accept_timeout_s)
            self.send(request.to_frame())
            message = self._reader.read()
        except TimeoutError:
            raise DriverRefused(f"it did not accept the region within {accept_timeout_s:g} s") from None
        except (DriverProtocolError, OSError) as exc:
            raise DriverRefused(f"its answer broke off before it accepted the region: {exc}") from None
        finally:
            with contextlib.suppress(OSError):
                self._sock.settimeout(None)  # once accepted, a region may run for hours
        if message is None:
            raise DriverRefused("it hung up before accepting the region")
        kind = message.get("type")
        if kind == "error":
            raise DriverRefused(str(message.get("error")))
        if kind != "accepted":
            raise DriverRefused(f"its first frame is {kind!r}; allowed: 'accepted' or 'error'")
        try:
            self.send({"op": "go"})  # from here on the region is the driver's: this process runs nothing itself
        except OSError as exc:
            raise DriverRefused(f"it hung up after accepting the region: {exc}") from None
        pid = message.get("pid")
        return pid if isinstance(pid, int) else 0

    def follow(self, record_session: SessionRecorder, echo: Callable[[str], None]) -> DriverOutcome:
        """Echo the accepted region's lines, record its sessions; the outcome once it ends."""
        reader = self._reader
        if reader is None:
            raise RuntimeError("ready driver: follow() before start()")
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
            elif kind == "error":  # the child failed before its region started (nothing ran)
                return DriverOutcome(None, "", {}, complete=False, error=str(message.get("error")))

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
        storage_options=None if pool.storage_options is None else dict(pool.storage_options),
    )
