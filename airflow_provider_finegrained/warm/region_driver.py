"""The pool's ready region driver: ``python -m airflow_provider_finegrained.warm.region_driver --folder F``.

A Python process the pool's supervisor keeps beside the Spark Connect server. It imports pyspark's
Connect client (pandas, pyarrow, gRPC: seconds) and the provider's runtime once, then listens on
``<folder>/driver.sock`` (0600). Each task that connects gets a child forked from it (milliseconds, the
imports already done) that runs the task's region job as the task process would (``run_region_warm``)
and streams its output back (see :mod:`warm.driver_protocol`). The child dies with the task: when the
task's end of the socket closes, the child interrupts its Connect sessions and exits; it also dies with
this process (parent-death signal), which dies with the supervisor.

The launch spec (the pool's URL and token) comes on stdin, never on the command line. This process never
opens a Connect session itself, so each child starts with no gRPC channel or thread inherited.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
import traceback
from collections.abc import Sequence
from typing import Any

from airflow_provider_finegrained.spark.parent_death import set_parent_death_signal
from airflow_provider_finegrained.warm.driver_protocol import (
    ACCEPT_TIMEOUT_S,
    SOCKET_NAME,
    DriverProtocolError,
    FrameReader,
    RunRequest,
    encode,
    parse_request,
)
from airflow_provider_finegrained.warm.state import DRIVER_MODULE

GO_TIMEOUT_S = 2 * ACCEPT_TIMEOUT_S
"""How long a child waits for the task's ``go`` after ``accepted`` (the task gives up on its side sooner)."""
RECORD_TIMEOUT_S = 60.0
"""How long a child waits for the task to record a session on its lease."""
KILL_GRACE_S = 30.0
"""After the task's ``kill``, how long the region may take to report its interrupted stages before the child exits."""


def preload() -> None:
    """What a region needs, imported once here instead of in every task (the point of this process)."""
    import pyspark.sql.connect.session  # pandas, pyarrow, gRPC, protobuf
    import pyspark.sql.functions  # noqa: F401

    import airflow_provider_finegrained.runtime.connect_region
    import airflow_provider_finegrained.runtime.output  # noqa: F401


def bind(folder: str) -> socket.socket:
    """The listening socket at ``folder/driver.sock``, 0600 from its creation (a stale one is replaced)."""
    path = os.path.join(folder, SOCKET_NAME)
    with contextlib.suppress(FileNotFoundError):
        os.remove(path)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    previous = os.umask(0o177)
    try:
        server.bind(path)
    finally:
        os.umask(previous)
    server.listen(16)
    return server


def peer_uid(conn: socket.socket) -> int:
    """The user id of the process at the other end (Linux ``SO_PEERCRED``)."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


def serve(folder: str, url: str, token: str | None, stop: threading.Event | None = None) -> None:
    """Accept tasks until stopped; one forked child per task. Removes the socket when it stops."""
    server = bind(folder)
    # Children are reaped by the kernel: this process never waits for one.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    print(f"region driver ready in {folder} (pid {os.getpid()})", flush=True)
    try:
        while stop is None or not stop.is_set():
            try:
                conn, _ = server.accept()
            except InterruptedError:
                continue
            pid = os.fork()
            if pid == 0:  # the child: serve this task, never return into the loop
                code = 1
                try:
                    server.close()
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # stage code may run subprocesses
                    code = Child(conn, url, token).run()
                except BaseException:
                    traceback.print_exc()
                finally:
                    os._exit(code)
            conn.close()
            print(f"region driver: child {pid} serves a task", flush=True)
    finally:
        with contextlib.suppress(OSError):
            os.remove(os.path.join(folder, SOCKET_NAME))
        server.close()


class Child:
    """One task's region, run in a child of the ready driver."""

    def __init__(self, conn: socket.socket, url: str, token: str | None) -> None:
        self.conn = conn
        self.url = url
        self.token = token
        self._send_lock = threading.Lock()
        self._replies: list[dict[str, Any]] = []
        self._reply = threading.Condition()
        self._sessions: Any = None
        self._killed = threading.Event()
        self._finished = threading.Event()
        self._gone = False

    def send(self, message: dict[str, Any]) -> None:
        # A failed send means the task is gone: the reader sees it and ends the child.
        with self._send_lock, contextlib.suppress(OSError):
            self.conn.sendall(encode(message))

    def run(self) -> int:
        set_parent_death_signal()  # dies with the ready driver (a stopped pool leaves no region behind)
        reader = FrameReader(self.conn)
        try:
            if peer_uid(self.conn) != os.getuid():
                raise DriverProtocolError("the task runs as another user")
            first = reader.read()
            if first is None:
                return 0
            request = parse_request(first, self.token)
            job = region_job(request.job)
        except DriverProtocolError as exc:
            self.send({"type": "error", "error": str(exc)})
            return 2
        # Nothing runs before the task's ``go``: a task that gave up waiting for ``accepted`` runs the region
        # itself and hangs up, and this child must then leave the region (its status files too) alone.
        self.send({"type": "accepted", "pid": os.getpid()})
        self.conn.settimeout(GO_TIMEOUT_S)
        try:
            go = reader.read()
        except (DriverProtocolError, OSError):
            go = None
        self.conn.settimeout(None)
        if go is None or go.get("op") != "go":
            return 0
        self._adopt(request)
        threading.Thread(target=self._listen, args=(reader,), name="driver-task-socket", daemon=True).start()
        forward = self._capture_output()
        failed: str | None = None
        try:
            failed = self._run(request, job)
        finally:
            self._release_output(forward)
        sessions = self._sessions
        self._finished.set()
        self.send(
            {
                "type": "done",
                "failed": failed,
                "application_id": sessions.application_id if sessions is not None else "",
                "sessions": dict(sessions.session_ids) if sessions is not None else {},
            }
        )
        return 0

    def _adopt(self, request: RunRequest) -> None:
        """What the stage code would see in the task process: its import path, environment and folder."""
        for entry in reversed(request.sys_path):
            if entry not in sys.path:
                sys.path.insert(0, entry)
        if request.env:
            os.environ.clear()
            os.environ.update(request.env)
        if request.cwd and os.path.isdir(request.cwd):
            os.chdir(request.cwd)

    def _run(self, request: RunRequest, job: Any) -> str | None:
        from airflow_provider_finegrained.runtime.connect_region import ConnectSessions, run_region_warm

        # The driver's own token (the pool's): the same one the task proved it holds.
        self._sessions = ConnectSessions(
            request.url,
            request.ui_url,
            token=self.token,
            on_session=self._record,
            storage_root=job.storage_root,
            storage_options=request.storage_options,
        )
        if self._killed.is_set():
            self._sessions.interrupt()
        return run_region_warm(job, self._sessions)

    def _record(self, session_id: str, user_id: str | None) -> None:
        """Have the task record the session on its lease before the session runs anything."""
        self.send({"type": "session", "id": session_id, "user_id": user_id})
        deadline = time.monotonic() + RECORD_TIMEOUT_S
        with self._reply:
            while not self._replies:
                left = deadline - time.monotonic()
                if self._gone or left <= 0:
                    raise RuntimeError(f"session {session_id}: the task did not record it on its lease")
                self._reply.wait(left)
            reply = self._replies.pop(0)
        if reply.get("op") != "recorded":
            from airflow_provider_finegrained.warm.state import WarmPoolUnavailable

            raise WarmPoolUnavailable(str(reply.get("error") or "the task refused the session"))

    def _listen(self, reader: FrameReader) -> None:
        """The task's frames: replies to session records, ``kill``; its end closing means it died."""
        while True:
            try:
                message = reader.read()
            except (DriverProtocolError, OSError):
                message = None
            if message is None:
                break
            op = message.get("op")
            if op == "kill":
                self._interrupt()
                threading.Timer(KILL_GRACE_S, os._exit, args=(3,)).start()
            elif op in ("recorded", "refused"):
                with self._reply:
                    self._replies.append(message)
                    self._reply.notify_all()
        if self._finished.is_set():
            return  # the task read ``done`` and hung up
        # The task is gone (killed, or it crashed): stop the region's Spark work and leave no process behind.
        with self._reply:
            self._gone = True
            self._reply.notify_all()
        self._interrupt()
        os._exit(4)

    def _interrupt(self) -> None:
        self._killed.set()
        sessions = self._sessions
        if sessions is not None:
            with contextlib.suppress(Exception):
                sessions.interrupt()

    def _capture_output(self) -> threading.Thread:
        """Send what the region prints (fd 1 and 2, so subprocesses' output too) to the task, line by line."""
        sys.stdout.flush()
        sys.stderr.flush()
        read_end, write_end = os.pipe()
        self._saved = (os.dup(1), os.dup(2))
        os.dup2(write_end, 1)
        os.dup2(write_end, 2)
        os.close(write_end)
        forward = threading.Thread(target=self._forward, args=(read_end,), name="driver-output", daemon=True)
        forward.start()
        return forward

    def _forward(self, read_end: int) -> None:
        with os.fdopen(read_end, "rb") as pipe:
            for raw in pipe:
                self.send({"type": "log", "line": raw.decode("utf-8", errors="replace").rstrip("\n")})

    def _release_output(self, forward: threading.Thread) -> None:
        """Restore fd 1 and 2 and wait until every captured line has been sent (before ``done``)."""
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(self._saved[0], 1)
        os.dup2(self._saved[1], 2)
        forward.join(timeout=10.0)


def region_job(data: dict[str, Any]) -> Any:
    """The :class:`RegionJob` of its JSON form (``dataclasses.asdict``), as ``RegionJob.load`` builds it."""
    from airflow_provider_finegrained.runtime.job import InputRef, RegionJob, StageJob

    fields = dict(data)
    try:
        stages = [StageJob(**{**s, "inputs": [InputRef(**i) for i in s["inputs"]]}) for s in fields.pop("stages")]
        return RegionJob(**fields, stages=stages)
    except (TypeError, KeyError) as exc:
        raise DriverProtocolError(f"the request's job is not a region job: {exc}") from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m " + DRIVER_MODULE)
    parser.add_argument("--folder", required=True)
    args = parser.parse_args(argv)
    spec = json.load(sys.stdin)  # the pool's URL and token: never on the command line
    sys.stdin.close()
    parent = spec.get("parent")
    set_parent_death_signal()  # dies with the supervisor, however it dies
    if parent is not None and os.getppid() != parent:
        return 1  # the supervisor died before the signal was set
    began = time.monotonic()
    preload()
    print(f"region driver imported pyspark's Connect client in {time.monotonic() - began:.1f} s", flush=True)
    serve(os.path.abspath(args.folder), str(spec["url"]), spec.get("token"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
