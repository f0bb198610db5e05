"""Run spark-submit in its own process group, stream its output, and kill its whole process tree.

spark-submit is bound to this process's life: it gets SIGKILL from the kernel when this process dies, even
by SIGKILL (Linux's parent-death signal, see ``spark.parent_death``), so a killed Airflow task leaves no
orphan JVM. Its ids are read from its output lines (``spark.log_ids``); its tree is stopped through
``spark.process_tree``.
"""

from __future__ import annotations

import queue
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import IO

from airflow_provider_finegrained.spark.log_ids import find_application_id, find_driver_id
from airflow_provider_finegrained.spark.parent_death import popen_bound
from airflow_provider_finegrained.spark.process_tree import (
    DEFAULT_KILL_GRACE_S,
    KillReport,
    kill_process_tree,
    process_group_members,
)

DEFAULT_TAIL_LINES = 50


class SparkSubmitTimeout(TimeoutError):
    """spark-submit ran longer than its timeout; its process tree was killed."""

    def __init__(self, timeout_s: float, application_id: str | None, tail: Sequence[str]) -> None:
        super().__init__(
            f"spark-submit did not finish within {timeout_s:g} s and was killed"
            + (f" (application {application_id})" if application_id else "")
        )
        self.timeout_s = timeout_s
        self.application_id = application_id
        self.tail = tuple(tail)


class SparkSubmitCancelled(RuntimeError):
    """`kill()` was called before `start()`; nothing was started."""


@dataclass(frozen=True)
class SubmitResult:
    """How a spark-submit run ended; a non-zero returncode is for the caller to judge."""

    returncode: int
    application_id: str | None
    duration_s: float
    tail: tuple[str, ...] = ()
    driver_id: str | None = None
    killed: bool = False


_EOF = None


class SparkSubmitProcess:
    """One spark-submit run: `start()`, then `wait()`; `kill()` may come from any thread.

    Output lines are handed to `on_line` (and ids to `app_id_callback`) in the thread that calls
    `wait()`, so callers may log from there as usual.
    """

    def __init__(
        self,
        command: Sequence[str],
        env: Mapping[str, str] | None,
        on_line: Callable[[str], None],
        app_id_callback: Callable[[str], None] | None = None,
        timeout: float | None = None,
        kill_grace_s: float = DEFAULT_KILL_GRACE_S,
        tail_lines: int = DEFAULT_TAIL_LINES,
        cwd: str | None = None,
        die_with_parent: bool = True,
    ) -> None:
        """``die_with_parent``: spark-submit gets SIGKILL when this process ends (see the module's note).

        In cluster deploy mode that stops only the local spark-submit client; the driver on the cluster
        runs on.
        """
        if not command:
            raise ValueError("empty command")
        self.command = list(command)
        self.env = None if env is None else dict(env)
        self.on_line = on_line
        self.app_id_callback = app_id_callback
        self.timeout = timeout
        self.kill_grace_s = kill_grace_s
        self.cwd = cwd
        self.die_with_parent = die_with_parent
        self.application_id: str | None = None
        self.driver_id: str | None = None
        self._tail: deque[str] = deque(maxlen=tail_lines)
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._started_at = 0.0
        self._kill_requested = False
        self._output_ended = False

    @property
    def pid(self) -> int | None:
        """Pid of spark-submit, which is also its process group id; None before `start()`."""
        return None if self._proc is None else self._proc.pid

    @property
    def tail(self) -> tuple[str, ...]:
        """The last output lines seen so far."""
        return tuple(self._tail)

    @property
    def returncode(self) -> int | None:
        """spark-submit's exit code once it has ended; None before `start()` and while it runs."""
        return None if self._proc is None else self._proc.poll()

    def start(self) -> None:
        """Start spark-submit in a new session, so that its whole tree can be signalled as a group."""
        with self._lock:
            if self._kill_requested:
                raise SparkSubmitCancelled("spark-submit was cancelled before it started")
            if self._proc is not None:
                raise RuntimeError("spark-submit already started")
            self._started_at = time.monotonic()
            options: dict[str, object] = {
                "env": self.env,
                "cwd": self.cwd,
                "stdin": subprocess.DEVNULL,
                "stdout": subprocess.PIPE,
                "stderr": subprocess.STDOUT,
                "start_new_session": True,
            }
            self._proc = (
                popen_bound(self.command, **options)
                if self.die_with_parent
                else subprocess.Popen(self.command, **options)  # type: ignore[call-overload]
            )
        self._reader = threading.Thread(
            target=self._read, args=(self._proc.stdout,), name=f"spark-submit-{self._proc.pid}", daemon=True
        )
        self._reader.start()

    def _read(self, stream: IO[bytes] | None) -> None:
        try:
            if stream is not None:
                with stream:
                    for raw in iter(stream.readline, b""):
                        self._lines.put(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
        finally:
            self._lines.put(_EOF)

    def _handle(self, line: str) -> None:
        self._tail.append(line)
        self.on_line(line)
        if self.application_id is None and (app_id := find_application_id(line)):
            self.application_id = app_id
            if self.app_id_callback is not None:
                self.app_id_callback(app_id)
        if self.driver_id is None and (driver_id := find_driver_id(line)):
            self.driver_id = driver_id
            if self.app_id_callback is not None:
                self.app_id_callback(driver_id)

    def follow_until(self, done: Callable[[], bool]) -> bool:
        """Stream output until ``done()`` holds or spark-submit ends; whether ``done()`` held. spark-submit runs
        on either way: ``wait`` follows it to its end, ``kill`` stops it. Kills it on timeout or if a callback
        raises, as ``wait`` does."""
        proc = self._running()
        try:
            return self._pump(proc, self._deadline(), done)
        except SparkSubmitTimeout:
            raise
        except BaseException:
            self.kill()
            raise

    def _running(self) -> subprocess.Popen[bytes]:
        if self._proc is None:
            raise RuntimeError("spark-submit was not started")
        return self._proc

    def _deadline(self) -> float | None:
        return None if self.timeout is None else self._started_at + self.timeout

    def wait(self) -> SubmitResult:
        """Stream output until spark-submit ends; kill it on timeout or if a callback raises."""
        proc = self._running()
        try:
            self._pump(proc, self._deadline())
            returncode = proc.wait()
        except SparkSubmitTimeout:
            raise
        except BaseException:
            self.kill()
            raise
        # spark-submit is gone; stop anything it left behind in its group (a driver that outlives
        # the launcher is exactly the orphan we must never leave).
        self._stop_leftovers(proc)
        self._drain()
        return SubmitResult(
            returncode=returncode,
            application_id=self.application_id,
            duration_s=time.monotonic() - self._started_at,
            tail=self.tail,
            driver_id=self.driver_id,
            killed=self._kill_requested,
        )

    def _pump(
        self, proc: subprocess.Popen[bytes], deadline: float | None, done: Callable[[], bool] = lambda: False
    ) -> bool:
        """Hand lines over until ``done()`` holds (True), or the output ends or spark-submit exits (False; a
        leftover may keep the pipe)."""
        while not self._output_ended:
            if done():
                return True
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                self.kill()
                self._drain()
                raise SparkSubmitTimeout(self.timeout or 0.0, self.application_id, self.tail)
            try:
                line = self._lines.get(timeout=0.5 if remaining is None else min(0.5, remaining))
            except queue.Empty:
                if proc.poll() is not None:
                    break
                continue
            if line is _EOF:
                break
            self._handle(line)
        self._output_ended = True
        return done()

    def _drain(self) -> None:
        """Hand over the lines already read, without waiting long for a pipe that others hold open."""
        if self._reader is not None:
            self._reader.join(timeout=5.0)
        while True:
            try:
                line = self._lines.get_nowait()
            except queue.Empty:
                return
            if line is not _EOF:
                self._handle(line)

    def _stop_leftovers(self, proc: subprocess.Popen[bytes]) -> None:
        if process_group_members(proc.pid):
            kill_process_tree(proc, self.kill_grace_s)

    def kill(self) -> KillReport | None:
        """Kill spark-submit and everything it started; safe to call from any thread, and twice."""
        with self._lock:
            self._kill_requested = True
            proc = self._proc
        if proc is None:
            return None
        return kill_process_tree(proc, self.kill_grace_s)


def run_spark_submit(
    command: Sequence[str],
    env: Mapping[str, str] | None,
    on_line: Callable[[str], None],
    app_id_callback: Callable[[str], None] | None = None,
    timeout: float | None = None,
) -> SubmitResult:
    """Run spark-submit to the end, streaming merged stdout/stderr lines to `on_line`.

    `env` is the complete environment (see `build_spark_submit_env`); None inherits this process's.
    Raises SparkSubmitTimeout after killing the tree when `timeout` seconds pass.
    """
    process = SparkSubmitProcess(command, env, on_line, app_id_callback=app_id_callback, timeout=timeout)
    process.start()
    return process.wait()
