"""Measuring a process run to its end: wall time, peak memory of its process tree, CPU of what it waited for."""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

import psutil

Processes = Callable[[], list[psutil.Process]]
"""Processes outside a run's tree that work for it (a warm pool it uses), asked again at every sample."""


@dataclass
class ProcessRun:
    """One subprocess run to its end: exit code, wall seconds, peak RSS of its tree, CPU of its waited tree."""

    returncode: int
    wall_s: float
    peak_rss_bytes: int
    cpu_s: float
    output_tail: list[str] = field(default_factory=list)


def tree_rss(root: psutil.Process) -> int:
    """Resident bytes of ``root`` and all its descendants now (processes that vanish meanwhile count 0)."""
    try:
        procs = [root, *root.children(recursive=True)]
    except psutil.Error:
        return 0
    return rss_of(procs)


def rss_of(procs: Sequence[psutil.Process]) -> int:
    """Resident bytes of ``procs`` now (processes that vanish meanwhile count 0)."""
    total = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            total += proc.memory_info().rss
    return total


def cpu_of(procs: Sequence[psutil.Process]) -> dict[int, float]:
    """User and system CPU seconds of each of ``procs`` so far, by pid (vanished ones left out)."""
    out: dict[int, float] = {}
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            t = proc.cpu_times()
            out[proc.pid] = t.user + t.system
    return out


def children_cpu_s() -> float:
    """CPU seconds of every child this process has waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class PeakRss:
    """Samples the RSS of ``root``'s tree (plus ``extra``'s) every ``interval_s`` in a thread; ``peak`` is the most."""

    def __init__(self, root: psutil.Process, extra: Processes | None = None, interval_s: float = 0.2) -> None:
        self.root, self.extra, self.interval_s = root, extra, interval_s
        self.peak = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._done.is_set():
            outside = rss_of(self.extra()) if self.extra else 0  # the list holds the descendants already
            self.peak = max(self.peak, tree_rss(self.root) + outside)
            self._done.wait(self.interval_s)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._done.set()
        self._thread.join()


def wait_or_kill(proc: subprocess.Popen[bytes], timeout_s: float) -> int:
    """``proc``'s exit code; on a timeout, or the harness being stopped, its whole tree is killed first.

    Nothing of a run may outlive it (an orphaned ``airflow dags test`` would start the warm pool again after the
    harness stopped it). A timeout returns the killed process's code; anything else is raised again.
    """
    try:
        return proc.wait(timeout=timeout_s)
    except BaseException as exc:
        with contextlib.suppress(psutil.Error):
            for child in psutil.Process(proc.pid).children(recursive=True):
                child.kill()
        proc.kill()
        returncode = proc.wait()
        if not isinstance(exc, subprocess.TimeoutExpired):
            raise
        return returncode


def run_measured(
    command: Sequence[str],
    env: Mapping[str, str],
    *,
    cwd: str | None = None,
    log: Path | None = None,
    interval_s: float = 0.2,
    timeout_s: float = 3600.0,
    extra: Processes | None = None,
) -> ProcessRun:
    """Run ``command`` to its end, sampling its process tree's RSS every ``interval_s``.

    CPU is the change of this process's waited-children usage, so it counts every descendant that its
    parent waited for (spark-submit's JVM and Python workers, Airflow's task processes); run one measured
    command at a time for it to mean one command. ``extra`` lists processes outside the tree that work for
    it (a warm pool the run uses): their RSS joins each sample and their CPU over the run is added.
    """
    cpu_before = children_cpu_s()
    extra_before = sum(cpu_of(extra()).values()) if extra else 0.0
    start = time.perf_counter()
    with open(log or os.devnull, "ab") as sink:
        proc = subprocess.Popen(list(command), env=dict(env), cwd=cwd, stdout=sink, stderr=subprocess.STDOUT)
        with PeakRss(psutil.Process(proc.pid), extra, interval_s) as rss:
            returncode = wait_or_kill(proc, timeout_s)
    wall = time.perf_counter() - start
    tail = log.read_text(errors="replace").splitlines()[-30:] if log and log.exists() else []
    extra_cpu = sum(cpu_of(extra()).values()) - extra_before if extra else 0.0
    return ProcessRun(returncode, wall, rss.peak, children_cpu_s() - cpu_before + extra_cpu, tail)
