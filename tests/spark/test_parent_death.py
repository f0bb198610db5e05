"""Children bound to their parent's life: a parent killed with SIGKILL leaves no child behind (Linux)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from airflow_provider_finegrained.spark.parent_death import (
    die_with_parent_jvm,
    parent_death_signal,
    supported,
)

pytestmark = pytest.mark.skipif(not supported(), reason="the parent-death signal is Linux's")

# A parent that starts `sleep` through SparkSubmitProcess from a thread that ends at once (as a thread
# pool's worker may), prints the child's pid, and waits to be killed.
_PARENT = textwrap.dedent(
    """
    import sys, threading, time
    from airflow_provider_finegrained.spark.process import SparkSubmitProcess

    process = SparkSubmitProcess(["sleep", "300"], None, on_line=print, die_with_parent=sys.argv[1] == "bound")
    starter = threading.Thread(target=process.start)
    starter.start()
    starter.join()
    print(process.pid, flush=True)
    time.sleep(300)
    """
)


def _start_parent(mode: str) -> tuple[subprocess.Popen[str], psutil.Process]:
    parent = subprocess.Popen(
        [sys.executable, "-c", _PARENT, mode], stdout=subprocess.PIPE, text=True, start_new_session=True
    )
    assert parent.stdout is not None
    child = psutil.Process(int(parent.stdout.readline()))
    assert child.cmdline() == ["sleep", "300"]
    return parent, child


def _gone_within(proc: psutil.Process, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


def test_a_bound_child_outlives_the_thread_that_started_it_and_dies_with_the_process() -> None:
    parent, child = _start_parent("bound")
    try:
        # The thread that called start() has ended: the child runs on (it was forked by the spawner thread).
        time.sleep(1.0)
        assert child.is_running() and child.status() != psutil.STATUS_ZOMBIE
        parent.kill()  # SIGKILL: no handler, no finally, no atexit
        parent.wait()
        assert _gone_within(child, 5.0)
    finally:
        parent.kill()
        if child.is_running():
            child.kill()


def test_an_unbound_child_is_orphaned_by_sigkill() -> None:
    """What every spark-submit did before: re-parented to init (or a subreaper) and running on."""
    parent, child = _start_parent("unbound")
    try:
        parent.kill()
        parent.wait()
        assert not _gone_within(child, 2.0)
        assert child.ppid() != parent.pid
    finally:
        child.kill()


def test_the_signal_is_set_and_read_back_in_a_child() -> None:
    code = (
        "from airflow_provider_finegrained.spark.parent_death import parent_death_signal, set_parent_death_signal\n"
        "before = parent_death_signal(); set_parent_death_signal(15); print(before, parent_death_signal())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["0", "15"]
    assert parent_death_signal() in (0, signal.SIGKILL)  # this test process itself is left as it was


@pytest.mark.parametrize(
    ("env", "returncode", "output"),
    [
        # Not started by a Spark JVM (no py4j gateway): nothing is set.
        ({}, 0, "False 0"),
        # "Started by a JVM" but the parent is this test's Python: the JVM is taken for dead, the driver ends.
        ({"PYSPARK_GATEWAY_PORT": "1"}, -signal.SIGKILL, ""),
    ],
)
def test_die_with_parent_jvm(env: dict[str, str], returncode: int, output: str) -> None:
    code = (
        "from airflow_provider_finegrained.spark.parent_death import die_with_parent_jvm, parent_death_signal\n"
        "print(die_with_parent_jvm(), parent_death_signal())"
    )
    base = {k: v for k, v in os.environ.items() if k != "PYSPARK_GATEWAY_PORT"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**base, **env})
    assert (done.returncode, done.stdout.strip()) == (returncode, output)


def test_die_with_parent_jvm_does_nothing_in_this_process() -> None:
    assert "PYSPARK_GATEWAY_PORT" not in os.environ
    assert die_with_parent_jvm() is False
