"""A real local-mode region through the local launcher, in a process standing in for the Airflow task.

While the region's stage blocks in Python workers: no secret setting is on any of its processes' command
lines, yet the driver sees them all; the secret properties file is already gone. Then the task process is
killed with SIGKILL: the spark-submit JVM, the Python driver, pyspark's worker daemon and its workers all
end within seconds (before the fix they ran on, re-parented to init: docs/cluster.md).
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from airflow_provider_finegrained.spark.java import check_java
from tests.chaos.region_task import MARKER_ENV, PUBLIC, SECRETS

pytestmark = [pytest.mark.slow, pytest.mark.spark]

HARNESS = str(Path(__file__).with_name("region_task.py"))
REPO_ROOT = str(Path(__file__).resolve().parents[2])
START_TIMEOUT_S = 240.0
GONE_WITHIN_S = 10.0


@dataclass
class RunningRegion:
    harness: subprocess.Popen[bytes]
    work: Path
    marker: str

    def processes(self) -> list[psutil.Process]:
        """The live processes of the region: every process whose environment carries the marker."""
        found = []
        for proc in psutil.process_iter():
            try:
                if proc.environ().get(MARKER_ENV) == self.marker and proc.status() != psutil.STATUS_ZOMBIE:
                    found.append(proc)
            except psutil.Error:
                continue
        return found

    def log(self) -> str:
        return (self.work / "harness.log").read_text(errors="replace")[-3000:]


@pytest.fixture(scope="module")
def region(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRegion]:
    check_java()
    work = tmp_path_factory.mktemp("kill-region")
    marker = uuid.uuid4().hex
    # TMPDIR: the launcher's secret properties file is made there, where the test can look for it.
    env = {**os.environ, "PYTHONPATH": REPO_ROOT, "SPARK_LOCAL_IP": "127.0.0.1", "TMPDIR": str(work)}
    with open(work / "harness.log", "wb") as log:
        harness = subprocess.Popen(
            [sys.executable, HARNESS, str(work), marker],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    running = RunningRegion(harness, work, marker)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while len(glob.glob(str(work / "worker-*"))) < 2:
            assert harness.poll() is None, f"the harness ended early:\n{running.log()}"
            assert time.monotonic() < deadline, f"no Python worker started:\n{running.log()}"
            time.sleep(0.5)
        yield running
    finally:
        harness.kill()
        harness.wait()
        for proc in running.processes():
            proc.kill()


def _kind(proc: psutil.Process) -> str:
    cmdline = proc.cmdline()
    if proc.name() == "java":
        return "jvm"
    if any(part.endswith("runtime/driver.py") for part in cmdline):
        return "driver"
    if "pyspark.daemon" in cmdline:
        # The daemon forks its workers: a worker's parent is the daemon, the daemon's the JVM.
        return "worker" if psutil.Process(proc.ppid()).name() != "java" else "daemon"
    return " ".join(cmdline)


@pytest.mark.security
def test_no_secret_on_any_command_line_yet_the_driver_sees_them(region: RunningRegion) -> None:
    procs = region.processes()
    assert sorted(_kind(p) for p in procs) == ["daemon", "driver", "jvm", "worker", "worker"], region.log()
    for proc in procs:
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().decode(errors="replace")
        for value in SECRETS.values():
            assert value not in cmdline, f"a secret is on the command line of {proc.pid} ({_kind(proc)})"
    jvm = next(p for p in procs if _kind(p) == "jvm")
    assert "--properties-file" in jvm.cmdline()
    assert "spark.finegrained.kill.test=public-value" in jvm.cmdline()
    seen = json.loads((region.work / "seen.json").read_text())
    # The driver asked for SIGKILL on its JVM's death (runtime/driver.py's start-up).
    assert seen == {**SECRETS, **PUBLIC, "driver_parent_death_signal": signal.SIGKILL}
    # spark-submit read the file while starting; the launcher removed it once the application was named.
    assert glob.glob(str(region.work / "finegrained-conf-*")) == []


def _status(proc: psutil.Process) -> str:
    try:
        return str(proc.status())
    except psutil.NoSuchProcess:
        return psutil.STATUS_DEAD


def test_sigkill_of_the_task_leaves_no_spark_process(region: RunningRegion) -> None:
    procs = region.processes()
    before = {p.pid: _kind(p) for p in procs}
    assert sorted(before.values()) == ["daemon", "driver", "jvm", "worker", "worker"], region.log()
    region.harness.kill()
    region.harness.wait()
    killed_at = time.monotonic()
    alive = region.processes()
    while alive and time.monotonic() - killed_at < GONE_WITHIN_S:
        time.sleep(0.1)
        alive = region.processes()
    took = time.monotonic() - killed_at
    assert alive == [], f"left running {took:.1f} s after SIGKILL: {[(p.pid, before.get(p.pid)) for p in alive]}"
    for proc in procs:
        # is_running() compares the start time too: with pid_max at 32768 a busy machine reuses pids within
        # seconds, and another program's new process under an old pid is not ours. A process in the middle of
        # exiting no longer shows its environment (so the marker search above misses it) but still runs: it
        # gets what is left of the same deadline.
        while (
            proc.is_running() and _status(proc) != psutil.STATUS_ZOMBIE and time.monotonic() - killed_at < GONE_WITHIN_S
        ):
            time.sleep(0.1)
        assert not proc.is_running() or _status(proc) == psutil.STATUS_ZOMBIE, (proc.pid, before[proc.pid])
    print(f"all {len(before)} processes ({sorted(before.values())}) gone {took:.2f} s after SIGKILL")
