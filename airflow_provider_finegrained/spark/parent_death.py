"""Processes that die with their parent, even when the parent is killed with SIGKILL (Linux only).

Linux's parent-death signal (``prctl(PR_SET_PDEATHSIG)``) is delivered to a process when the *thread*
that forked it ends, and it survives ``execve`` (spark-submit is a bash script that ``exec``s spark-class,
which ``exec``s java: the same process, so the JVM keeps it), but not ``fork``. So every bound child is
forked by one thread that lives as long as the process (``spawn_bound``). Standard library only, so the
driver program can use it on a cluster node.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from functools import cache
from typing import TypeVar

PR_SET_PDEATHSIG = 1
PR_GET_PDEATHSIG = 2


@cache
def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    function: Callable[..., int] = libc.prctl
    return function


def supported() -> bool:
    """Whether this platform has a parent-death signal."""
    return _prctl() is not None


def set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """Ask the kernel to send ``sig`` to this process when its parent ends; False where unsupported."""
    prctl = _prctl()
    if prctl is None:
        return False
    if prctl(PR_SET_PDEATHSIG, ctypes.c_ulong(sig), 0, 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"prctl(PR_SET_PDEATHSIG): {os.strerror(error)}")
    return True


def parent_death_signal() -> int:
    """The parent-death signal set for this process (0: none, or unsupported)."""
    prctl = _prctl()
    if prctl is None:
        return 0
    value = ctypes.c_int(0)
    prctl(PR_GET_PDEATHSIG, ctypes.byref(value), 0, 0, 0)
    return value.value


def die_with_parent_preexec(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A ``subprocess.Popen(preexec_fn=...)`` that makes the child get ``sig`` when the forking thread ends.

    Call it in the parent (it resolves ``prctl`` and records the parent's pid there, so the child only
    makes two system calls). If the parent died between ``fork`` and ``prctl``, the child kills itself.
    """
    prctl = _prctl()
    parent = os.getpid()
    if prctl is None:
        return lambda: None
    setting = ctypes.c_ulong(sig)

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, setting, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), sig)

    return preexec


def _executable_name(pid: int) -> str | None:
    try:
        return os.path.basename(os.readlink(f"/proc/{pid}/exe"))
    except OSError:
        return None


def die_with_parent_jvm(sig: int = signal.SIGKILL) -> bool:
    """In a Python process a Spark JVM started (a driver under PythonRunner): get ``sig`` when the JVM ends.

    Does nothing (and returns False) outside such a process (no ``PYSPARK_GATEWAY_PORT``) or off Linux.
    A JVM that died before this call has left the process re-parented to another program: then this
    process sends itself ``sig`` at once.
    """
    if "PYSPARK_GATEWAY_PORT" not in os.environ or not set_parent_death_signal(sig):
        return False
    parent = os.getppid()
    name = _executable_name(parent)
    if parent == 1 or (name is not None and name != "java"):
        os.kill(os.getpid(), sig)
    return True


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
