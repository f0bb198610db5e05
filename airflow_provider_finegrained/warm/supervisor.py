"""The long-lived watcher of a warm pool: ``python -m airflow_provider_finegrained.warm.supervisor --folder F``.

Started detached (a session of its own) by ``ensure_started``, which writes the launch spec (the
server's command, port, shape, idle timeout, token, secret settings) to its stdin, so no secret is on a
command line. It owns the server JVM: starts it so that it dies with the supervisor (PR_SET_PDEATHSIG,
even on SIGKILL) with the token in its environment and the secret settings in a 0600 properties file
removed once the server is up, records it in ``pool.json``, stops it after the idle timeout with no
lease held, and stops it when terminated. It polices the leases: a region whose holder died (or whose
heartbeat went stale) has its Connect sessions interrupted and released. It also keeps the pool's ready
region driver (``warm/region_driver.py``) running beside the server, started again should it exit.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

import psutil  # type: ignore[import-untyped, unused-ignore]

from airflow_provider_finegrained.launchers.http import HttpRequestError, get_json
from airflow_provider_finegrained.secrets import REDACTED
from airflow_provider_finegrained.spark.process_tree import ProcessTreeSurvivedError, terminate_processes
from airflow_provider_finegrained.spark.properties_file import properties_file_args, secret_properties_file
from airflow_provider_finegrained.warm.auth import TOKEN_ENV, client_url
from airflow_provider_finegrained.warm.server import HOST
from airflow_provider_finegrained.warm.state import (
    DRIVER_LOG,
    DRIVER_MODULE,
    SERVER_LOG,
    ExpiredLease,
    expire_leases,
    last_used,
    live_leases,
    remove_state,
    start_lock,
    write_state,
)

PR_SET_PDEATHSIG = 1
POLL_S = 0.5
STOP_GRACE_S = 20.0
RELEASE_ATTEMPTS = 3
RELEASE_RETRY_S = 1.0
DRIVER_RESTART_S = 10.0
"""A ready driver that exited is started again, at most this often."""
_UI_RE = re.compile(r"Start Jetty (\S+):(\d+) for SparkUI")


def _die_with(parent: int) -> None:
    """In the child before exec: SIGKILL it when the supervisor dies, however it dies."""
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the supervisor died before prctl took effect
        os._exit(1)


class Supervisor:
    def __init__(self, folder: str, spec: dict[str, Any]) -> None:
        self.folder = folder
        self.spec = spec
        self.idle_timeout = float(spec.get("idle_timeout", 0.0))
        self.stop_requested = False
        self.state: dict[str, Any] = {
            "phase": "starting",
            "supervisor_pid": os.getpid(),
            "url": spec["url"],
            "port": spec["port"],
            "shape": spec.get("shape"),
            "master": spec.get("master"),
            "storage": spec.get("storage"),  # an HMAC of the storage credentials, never the credentials
            "idle_timeout": self.idle_timeout,
            "started_at": time.time(),
        }
        self.server: subprocess.Popen[bytes] | None = None
        self._log_start = 0
        self.token: str | None = spec.get("token")
        self._client_loaded = threading.Event()
        self.driver: subprocess.Popen[bytes] | None = None
        self._driver_started = 0.0

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self.stop_requested = True

    def run(self) -> int:
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        write_state(self.folder, self.state)
        log = open(os.path.join(self.folder, SERVER_LOG), "ab")  # noqa: SIM115 - the server's whole life
        # The log is appended to across restarts: this server's lines start here.
        self._log_start = log.tell()
        parent = os.getpid()
        env = dict(os.environ)
        if self.token:
            env[TOKEN_ENV] = self.token  # Spark's spark.connect.authenticate.token falls back to it
        try:
            # The JVM reads the file while it starts; it is removed once the server listens.
            with secret_properties_file(self.spec.get("secret_conf") or {}, self.folder) as properties:
                self.server = subprocess.Popen(
                    [*self.spec["command"], *properties_file_args(properties)],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.folder,
                    env=env,
                    preexec_fn=lambda: _die_with(parent),  # single-threaded here, so preexec_fn is safe
                )
                log.close()
                self.state["server_pid"] = self.server.pid
                write_state(self.folder, self.state)
                # Its imports overlap the server's start: it listens by the time the first region comes.
                self._start_driver()
                ready = self._wait_ready()
            if not ready:
                return 1
            self._watch()
        finally:
            log.close()
            self._stop_driver()
            self._stop_server()
        return 0

    def _start_driver(self) -> None:
        """Start the ready region driver (``warm/region_driver.py``) unless the spec turns it off."""
        if not self.spec.get("ready_driver", True):
            return
        self._driver_started = time.monotonic()
        with open(os.path.join(self.folder, DRIVER_LOG), "ab") as out:
            driver = subprocess.Popen(
                [sys.executable, "-m", DRIVER_MODULE, "--folder", self.folder],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.folder,
            )
        assert driver.stdin is not None
        # The pool's URL and token through stdin: never on a command line.
        with contextlib.suppress(OSError):
            spec = {"url": self.spec["url"], "token": self.token, "parent": os.getpid()}
            driver.stdin.write(json.dumps(spec).encode())
            driver.stdin.close()
        self.driver = driver
        self.state["driver_pid"] = driver.pid
        write_state(self.folder, self.state)

    def _keep_driver(self) -> None:
        """Start the ready driver again if it exited (not more often than every DRIVER_RESTART_S)."""
        driver = self.driver
        if driver is None or driver.poll() is None:
            return
        if time.monotonic() - self._driver_started < DRIVER_RESTART_S:
            return
        print(f"ready region driver exited with code {driver.returncode}: starting it again", flush=True)
        self._start_driver()

    def _stop_driver(self) -> None:
        """Stop the ready driver and the region children it forked."""
        if self.driver is not None:
            _stop_tree(self.driver, 5.0, 1.0, "warm pool's ready driver")
        self.driver = None

    def _fail(self, message: str) -> bool:
        self.state.update(phase="failed", error=message)
        write_state(self.folder, self.state)
        print(f"warm pool failed: {message}", flush=True)
        return False

    def _wait_ready(self) -> bool:
        assert self.server is not None
        deadline = time.monotonic() + float(self.spec.get("start_timeout", 300.0))
        while not self._port_open():
            if self.stop_requested:
                return self._fail("stopped during start-up")
            if self.server.poll() is not None:
                return self._fail(f"the server exited with code {self.server.returncode} during start-up")
            if time.monotonic() > deadline:
                return self._fail(f"the server did not open port {self.spec['port']} in time")
            time.sleep(POLL_S)
        ui_url = self._ui_url()
        self.state.update(
            phase="running",
            ready_at=time.time(),
            ui_url=ui_url,
            application_id=self._application_id(ui_url),
        )
        write_state(self.folder, self.state)
        print(f"warm pool running at {self.state['url']} (server pid {self.server.pid})", flush=True)
        return True

    def _port_open(self) -> bool:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.settimeout(1.0)
            return sock.connect_ex((HOST, int(self.spec["port"]))) == 0

    def _ui_url(self) -> str | None:
        try:
            with open(os.path.join(self.folder, SERVER_LOG), "rb") as handle:
                handle.seek(self._log_start)
                match = _UI_RE.search(handle.read().decode("utf-8", errors="replace"))
        except OSError:
            return None
        if match is None:
            return None
        host = HOST if match.group(1) in ("0.0.0.0", "") else match.group(1)
        return f"http://{host}:{match.group(2)}"

    def _application_id(self, ui_url: str | None) -> str | None:
        """The application's id from its UI's REST API (local mode logs it nowhere by default)."""
        if ui_url is None:
            return None
        url = f"{ui_url}/api/v1/applications"
        last: Exception | None = None
        for _ in range(20):
            try:
                return str(get_json(url, timeout_s=10.0)[0]["id"])
            except (HttpRequestError, OSError, ValueError, KeyError, IndexError, TypeError) as exc:
                last = exc
                time.sleep(0.5)
        print(f"no application id from {url}: {last}", flush=True)
        return None

    def _idle_for(self) -> float:
        return time.time() - max(last_used(self.folder), float(self.state.get("ready_at", 0.0)))

    def _watch(self) -> None:
        assert self.server is not None
        while not self.stop_requested:
            if self.server.poll() is not None:
                self._fail(f"the server exited with code {self.server.returncode}")
                return
            self._police_leases()
            self._keep_driver()
            if self.idle_timeout > 0 and self._idle_for() >= self.idle_timeout and live_leases(self.folder) == 0:
                # Decided under the start lock: a lease is only taken under it, so none can slip in now.
                with start_lock(self.folder, 0) as held:
                    if held and live_leases(self.folder) == 0 and self._idle_for() >= self.idle_timeout:
                        print(f"idle for {self.idle_timeout:g} s with no lease: stopping", flush=True)
                        self.state.update(phase="stopping", reason="idle")
                        write_state(self.folder, self.state)
                        self._stop_driver()
                        self._stop_server()
                        remove_state(self.folder, os.getpid())
                        return
            time.sleep(POLL_S)
        self.state.update(phase="stopping", reason="terminated")
        write_state(self.folder, self.state)

    def _police_leases(self) -> None:
        """Stop the sessions of leases whose holder died or stopped beating; load the client when one is held."""
        for lease in expire_leases(self.folder):
            try:
                self._end_sessions(lease)
            except Exception as exc:  # the pool outlives a failure to police one lease
                text = str(exc).replace(self.token, REDACTED) if self.token else str(exc)
                print(
                    f"lease {lease.name}: stopping its sessions failed: {type(exc).__name__}: {text[:500]}", flush=True
                )
        if not self._client_loaded.is_set() and live_leases(self.folder):
            # pyspark's Connect client takes seconds to import (pandas): have it ready before a holder dies.
            threading.Thread(target=_load_client, daemon=True).start()
            self._client_loaded.set()

    def _end_sessions(self, lease: ExpiredLease) -> None:
        """Interrupt every operation of the lease's sessions in the server, then release the sessions."""
        began = time.monotonic()
        print(
            f"lease {lease.name} (pid {lease.pid}) expired: {lease.reason}; "
            f"interrupting {len(lease.sessions)} Connect session(s)",
            flush=True,
        )
        from pyspark.sql.connect.client import DefaultChannelBuilder, SparkConnectClient

        for session_id, user_id in lease.sessions:
            url = client_url(self.state["url"], self.token, session_id=session_id, user_id=user_id)
            client = SparkConnectClient(DefaultChannelBuilder(url))
            try:
                # Both, each on its own: releasing a session also ends its operations, should the interrupt
                # fail (an operation caught between states); a session already gone is what we want.
                done, interrupted = self._try(session_id, "interrupt", client.interrupt_all)
                if done:
                    print(f"session {session_id}: interrupted {len(interrupted or [])} operation(s)", flush=True)
                for attempt in range(1, RELEASE_ATTEMPTS + 1):
                    # An operation the dead client sent last may still be on its way to a final state.
                    if self._try(session_id, f"release (attempt {attempt})", client.release_session)[0]:
                        print(f"session {session_id}: released", flush=True)
                        break
                    time.sleep(RELEASE_RETRY_S)
            finally:
                with contextlib.suppress(Exception):
                    client.close()
        print(f"lease {lease.name}: sessions stopped in {time.monotonic() - began:.1f} s", flush=True)

    def _try(self, session_id: str, what: str, call: Callable[[], Any]) -> tuple[bool, Any]:
        """``(True, call())``, or ``(False, None)`` after printing why it failed (token masked, 500 characters)."""
        try:
            return True, call()
        except Exception as exc:
            text = str(exc).replace(self.token, REDACTED) if self.token else str(exc)
            print(f"session {session_id}: {what} failed: {type(exc).__name__}: {text.strip()[:500]}", flush=True)
            return False, None

    def _stop_server(self) -> None:
        """SIGTERM the server and its children (the JVM stops its context), SIGKILL what is left."""
        if self.server is not None:
            _stop_tree(self.server, STOP_GRACE_S, 5.0, "warm pool's server")
        self.server = None


def _stop_tree(process: subprocess.Popen[bytes], grace_s: float, reap_s: float, what: str) -> None:
    """SIGTERM ``process`` and its children, SIGKILL what is left after ``grace_s``."""
    procs: list[psutil.Process] = []
    with contextlib.suppress(psutil.Error):
        root = psutil.Process(process.pid)
        procs = [root, *root.children(recursive=True)]

    def reap() -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=reap_s)

    try:
        # The tree as found before the first signal: once the process is reaped its pid is not ours.
        terminate_processes(lambda: procs, grace_s, what, before_check=reap)
    except ProcessTreeSurvivedError as exc:  # the pool's stop finds them again by their command line
        print(f"warm pool: {exc}", flush=True)


def _load_client() -> None:
    with contextlib.suppress(Exception):
        import pyspark.sql.connect.client  # noqa: F401


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m " + __spec__.name if __spec__ else None)
    parser.add_argument("--folder", required=True)
    args = parser.parse_args(argv)
    spec = json.load(sys.stdin)
    sys.stdin.close()
    supervisor = Supervisor(args.folder, spec)
    code = supervisor.run()
    if supervisor.state.get("phase") != "failed":
        remove_state(args.folder, os.getpid())
    return code


if __name__ == "__main__":
    sys.exit(main())
