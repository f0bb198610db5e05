"""The one process-tree helper: spark-submit trees, local clusters and warm pools all stop through it.

A tree is stopped by SIGTERM, then SIGKILL for what is left after a grace period, looking its members up
again after each round so that processes forked while it shuts down are caught too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import psutil  # type: ignore[import-untyped, unused-ignore]

DEFAULT_KILL_GRACE_S = 5.0


class ProcessTreeSurvivedError(RuntimeError):
    """Processes of a killed tree were still alive after SIGKILL."""


@dataclass(frozen=True)
class KillReport:
    """Pids that ended after SIGTERM, and those that needed SIGKILL."""

    terminated: tuple[int, ...]
    killed: tuple[int, ...]


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
