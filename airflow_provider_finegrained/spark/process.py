"""Run spark-submit in its own process group, stream its output, and kill its whole process tree.

spark-submit is bound to this process's life: it gets SIGKILL from the kernel when this process dies, even
by SIGKILL (Linux's parent-death signal, see ``spark.parent_death``), so a killed Airflow task leaves no
orphan JVM. The signal fires when the *thread* that forked the child ends, so every bound child is forked
by one thread that lives as long as the process (``spawn_bound``).
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import signal
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import IO, TypeVar

import psutil  # type: ignore[import-untyped, unused-ignore]

from airflow_provider_finegrained.spark.parent_death import die_with_parent_preexec

DEFAULT_KILL_GRACE_S = 5.0
DEFAULT_TAIL_LINES = 50

# Spark's ids, as they appear in its log lines: local mode (`local-<epoch ms>`, logged only when
# the event log is on, as `…/eventlog_v2_local-<ms>`, or when the driver prints it), standalone
# (`app-<yyyyMMddHHmmss>-<n>`), YARN (`application_<cluster ts>_<n>`), Kubernetes
# (`spark-<32 hex>`), standalone cluster-mode driver (`driver-<yyyyMMddHHmmss>-<n>`).
_BEFORE = r"(?<![A-Za-z0-9-])"  # `_` may precede: Spark names event logs `eventlog_v2_<app id>`
_AFTER = r"(?![A-Za-z0-9_-])"
_APP_ID_RE = re.compile(
    rf"{_BEFORE}(local-\d{{10,}}|app-\d{{14}}-\d{{4,}}|application_\d{{10,}}_\d{{4,}}|spark-[0-9a-f]{{32}}){_AFTER}"
)
_DRIVER_ID_RE = re.compile(rf"{_BEFORE}(driver-\d{{14}}-\d{{4,}}){_AFTER}")


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


class ProcessTreeSurvivedError(RuntimeError):
    """Processes of a killed tree were still alive after SIGKILL."""


@dataclass(frozen=True)
class SubmitResult:
    """How a spark-submit run ended; a non-zero returncode is for the caller to judge."""

    returncode: int
    application_id: str | None
    duration_s: float
    tail: tuple[str, ...] = ()
    driver_id: str | None = None
    killed: bool = False


@dataclass(frozen=True)
class KillReport:
    """Pids that ended after SIGTERM, and those that needed SIGKILL."""

    terminated: tuple[int, ...]
    killed: tuple[int, ...]


_YARN_SUBMITTED_RE = re.compile(r"(?:Submitted application|Application report for) (application_\d{10,}_\d{4,})\b")


def find_application_id(line: str) -> str | None:
    """Return the Spark application id in a log line, if any.

    A YARN id counts only once the application is submitted: Spark's client names it first ("Application ID
    is assigned") and then uploads the application's files, and a spark-submit that dies in between leaves
    nothing on the cluster to follow, kill or reattach to (measured on a real ResourceManager).
    """
    match = _APP_ID_RE.search(line)
    if match is None:
        return None
    if match.group(1).startswith("application_"):
        submitted = _YARN_SUBMITTED_RE.search(line)
        return submitted.group(1) if submitted else None
    return match.group(1)


def find_driver_id(line: str) -> str | None:
    """Return a standalone cluster-mode driver id (`driver-…`) in a log line, if any."""
    match = _DRIVER_ID_RE.search(line)
    return match.group(1) if match else None


# -- the one process-tree helper: spark-submit trees, local clusters and warm pools all stop through it --


def is_gone(proc: psutil.Process) -> bool:
    """Whether `proc` has exited (a zombie has: it only waits for its parent, possibly init, to reap it)."""
    try:
        return bool(proc.status() == psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return True


def live(procs: Iterable[psutil.Process]) -> list[psutil.Process]:
    """The processes of `procs` that have not exited."""
    return [proc for proc in procs if not is_gone(proc)]


def wait_gone(procs: Iterable[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """Wait until `procs` have exited (zombies count as exited); return those still alive."""
    # psutil.wait_procs would also wait for zombies to be reaped, which an init that reaps
    # lazily (as in some containers) can delay by seconds.
    deadline = time.monotonic() + timeout_s
    alive = live(procs)
    while alive and time.monotonic() < deadline:
        time.sleep(0.05)
        alive = live(alive)
    return alive


def with_descendants(found: Iterable[psutil.Process]) -> list[psutil.Process]:
    """``found`` and all their descendants, never this process or its ancestors (whatever they inherited)."""
    everything = {proc.pid: proc for proc in found}
    for proc in list(everything.values()):
        with contextlib.suppress(psutil.Error):
            for child in proc.children(recursive=True):
                everything.setdefault(child.pid, child)
    mine = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    return [proc for pid, proc in everything.items() if pid not in mine]


def signal_processes(procs: Iterable[psutil.Process], sig: signal.Signals, group: int | None = None) -> None:
    """Send `sig` to the process group `group` (if any) and to each of `procs`; the gone are skipped."""
    if group is not None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, sig)
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.send_signal(sig)


def terminate_processes(
    find: Callable[[], list[psutil.Process]],
    grace_s: float,
    what: str,
    *,
    group: int | None = None,
    kill_wait_s: float = 5.0,
    before_check: Callable[[], None] | None = None,
) -> KillReport:
    """SIGTERM what `find` returns, SIGKILL what is left after `grace_s` (late arrivals looked up again).

    `find` is called again after each round, so processes forked while the tree shuts down are caught.
    `before_check` runs before the final look-up (e.g. to reap one's own child). Raises
    ProcessTreeSurvivedError naming `what` if anything is still alive after a second SIGKILL.
    """
    procs = live(find())
    signal_processes(procs, signal.SIGTERM, group)
    alive = wait_gone(procs, grace_s)
    seen = {p.pid for p in alive}
    alive += [p for p in live(find()) if p.pid not in seen]
    if alive:
        signal_processes(alive, signal.SIGKILL, group)
        wait_gone(alive, kill_wait_s)
    if before_check is not None:
        before_check()
    survivors = live(find())
    if survivors:
        signal_processes(survivors, signal.SIGKILL, group)
        survivors = wait_gone(survivors, kill_wait_s)
    if survivors:
        raise ProcessTreeSurvivedError(f"processes {[p.pid for p in survivors]} of the {what} survived SIGKILL")
    killed_pids = {p.pid for p in alive}
    return KillReport(
        terminated=tuple(sorted(p.pid for p in procs if p.pid not in killed_pids)),
        killed=tuple(sorted(killed_pids)),
    )


def _group_members(group: int) -> list[psutil.Process]:
    """Live processes whose process group or session is `group`."""
    members = []
    for proc in psutil.process_iter():
        with contextlib.suppress(ProcessLookupError, PermissionError, psutil.Error):
            if group in (os.getpgid(proc.pid), os.getsid(proc.pid)) and not is_gone(proc):
                members.append(proc)
    return members


def process_group_members(group: int) -> list[int]:
    """Pids of the live (non-zombie) processes in process group or session `group`."""
    return [proc.pid for proc in _group_members(group)]


def _tree(pid: int | None, group: int | None) -> list[psutil.Process]:
    procs: dict[int, psutil.Process] = {}
    if pid is not None:
        with contextlib.suppress(psutil.Error):
            root = psutil.Process(pid)
            procs[root.pid] = root
            # Descendants that left the group are still ours to stop.
            for child in root.children(recursive=True):
                procs[child.pid] = child
    if group is not None:
        for member in _group_members(group):
            procs.setdefault(member.pid, member)
    return live(procs.values())


def _group_led_by(pid: int) -> int | None:
    """`pid` if it leads a process group or session that still has members; never our own group."""
    if pid in (os.getpgid(0), os.getsid(0)):
        return None
    try:
        if pid in (os.getpgid(pid), os.getsid(pid)):
            return pid
    except ProcessLookupError:
        pass
    # The leader is gone, but Linux keeps its pid reserved while its group or session has members.
    return pid if _group_members(pid) else None


def kill_process_tree(target: int | subprocess.Popen[bytes], grace_s: float = DEFAULT_KILL_GRACE_S) -> KillReport:
    """SIGTERM the process group led by `target` and all its descendants, then SIGKILL leftovers.

    Raises ProcessTreeSurvivedError if anything is still alive afterwards.
    """
    pid: int | None
    if isinstance(target, int):
        pid = target
        group = _group_led_by(pid)
    else:
        group = _group_led_by(target.pid)
        # Once our child is reaped its pid may be reused by a stranger: then only its group counts.
        pid = target.pid if target.poll() is None else None
    label = target if isinstance(target, int) else target.pid

    def reap() -> None:
        if isinstance(target, subprocess.Popen):
            # Reap our own child so it does not linger as a zombie.
            with contextlib.suppress(subprocess.TimeoutExpired):
                target.wait(timeout=5.0)

    return terminate_processes(lambda: _tree(pid, group), grace_s, f"tree of {label}", group=group, before_check=reap)


_T = TypeVar("_T")


class _Spawner:
    """A daemon thread that runs for as long as this process and forks the children bound to its life."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._requests: queue.Queue[tuple[Callable[[], object], Future[object]]] = queue.Queue()
        threading.Thread(target=self._serve, name="finegrained-spawner", daemon=True).start()

    def _serve(self) -> None:
        while True:
            make, future = self._requests.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(make())
                except BaseException as exc:  # handed to the caller, who raises it
                    future.set_exception(exc)

    def run(self, make: Callable[[], _T]) -> _T:
        future: Future[object] = Future()
        self._requests.put((make, future))
        return future.result()  # type: ignore[return-value]  # the future holds what `make` returned


_spawner: _Spawner | None = None
_spawner_lock = threading.Lock()


def _forget_spawner() -> None:
    # A forked child has none of its parent's threads: it starts its own spawner when it needs one.
    global _spawner, _spawner_lock
    _spawner, _spawner_lock = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_spawner)


def spawn_bound(make: Callable[[], _T]) -> _T:
    """Run ``make`` (which starts a child, e.g. ``subprocess.Popen`` with ``die_with_parent_preexec()``) in
    the thread that forks every child bound to this process's life, and return what it returned.

    A child forked from a short-lived thread (a thread pool's worker, a request handler) would get its
    parent-death signal when that thread ends, while this process still needs it.
    """
    global _spawner
    with _spawner_lock:
        if _spawner is None or _spawner.pid != os.getpid():
            _spawner = _Spawner()
        spawner = _spawner
    return spawner.run(make)


def popen_bound(command: Sequence[str], **kwargs: object) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(command, **kwargs)`` whose child gets SIGKILL when this process ends (Linux)."""
    preexec = die_with_parent_preexec()
    return spawn_bound(lambda: subprocess.Popen(command, preexec_fn=preexec, **kwargs))  # type: ignore[call-overload]


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
