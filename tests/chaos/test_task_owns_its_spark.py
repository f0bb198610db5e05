"""A real local-mode region through the local launcher, in a process standing in for the Airflow task.

While the region's stage blocks in Python workers: no secret setting is on any of its processes' command
lines, yet the driver sees them all; the secret properties file is already gone. Then the task process is
killed with SIGKILL: the spark-submit JVM, the Python driver, pyspark's worker daemon and its workers all
end within seconds (before the fix they ran on, re-parented to init: docs/cluster.md).

The short version, in CI, of the region kill trial (region.py; ``python -m tests.chaos --modes region``).
"""

from __future__ import annotations

import glob
import json
import signal
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from airflow_provider_finegrained.spark.java import check_java
from tests.chaos.outcome import REGION, TrialRecord
from tests.chaos.region import RunningRegion, kill_and_inspect, start_region
from tests.chaos.region_task import PUBLIC, SECRETS

pytestmark = [pytest.mark.slow, pytest.mark.spark]

REPO_ROOT = str(Path(__file__).resolve().parents[2])
START_TIMEOUT_S = 240.0
GONE_WITHIN_S = 10.0


@pytest.fixture(scope="module")
def region(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningRegion]:
    check_java()
    running = start_region(tmp_path_factory.mktemp("kill-region"), REPO_ROOT)
    try:
        if not running.wait_for_workers(START_TIMEOUT_S):
            assert running.task.poll() is None, f"the harness ended early:\n{running.log()}"
            pytest.fail(f"no Python worker started:\n{running.log()}")
        yield running
    finally:
        running.stop()


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


def test_sigkill_of_the_task_leaves_no_spark_process(region: RunningRegion) -> None:
    procs = region.processes()
    before = {p.pid: _kind(p) for p in procs}
    assert sorted(before.values()) == ["daemon", "driver", "jvm", "worker", "worker"], region.log()
    # The harness's own kill and check (what `python -m tests.chaos --modes region` records per trial): the
    # processes carrying the region's marker polled until none is left, then each process seen before the kill
    # by pid and start time (one in the middle of exiting no longer shows the marker but still runs).
    record = TrialRecord(mode=REGION, trial=1, run_id="test")
    kill_and_inspect(region, record, GONE_WITHIN_S, "both Python workers ran")
    took = record.seconds_to_finish or 0.0
    left = [(orphan.pid, before.get(orphan.pid), orphan.role) for orphan in record.orphans]
    assert left == [], f"left running {GONE_WITHIN_S:.0f} s after SIGKILL: {left}"
    print(f"all {len(before)} processes ({sorted(before.values())}) gone {took:.2f} s after SIGKILL")
