"""Region trials: a stand-in task (``region_task.py``) runs one real local[2] region; SIGKILL it at a chosen
moment and see that every process of its region ends with it.

No Airflow: what a task's own death does to the Spark it started (spark-submit's JVM, the Python driver,
pyspark's worker daemon and its workers) at every moment of the launch, and whether the launcher's secret
properties file is left behind. A moment is ``N`` (seconds after the stand-in started) or ``wN`` (N seconds
after both Python workers run). ``python -m tests.chaos --modes region --region-kill-at 5,w2``;
``test_task_owns_its_spark.py`` is the one trial CI runs.
"""

from __future__ import annotations

import glob
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import psutil

from tests.chaos import processes
from tests.chaos.outcome import REGION, ProcessInfo, TrialRecord
from tests.chaos.region_task import MARKER_ENV

TASK = str(Path(__file__).with_name("region_task.py"))
WORKERS = 2
"""Python workers the stand-in's stage runs (two partitions on local[2])."""
WORKERS_TIMEOUT_S = 240.0


def parse_moment(text: str) -> tuple[bool, float]:
    """``N`` -> (False, N): N seconds after the start; ``wN`` -> (True, N): N seconds after the workers run."""
    after_workers = text.startswith("w")
    seconds = float(text[1:] if after_workers else text)
    if not math.isfinite(seconds) or seconds < 0:
        raise ValueError(text)
    return after_workers, seconds


def _status(proc: psutil.Process) -> str:
    try:
        return str(proc.status())
    except psutil.NoSuchProcess:
        return str(psutil.STATUS_DEAD)


def lingering(procs: list[psutil.Process], deadline: float) -> list[psutil.Process]:
    """Of ``procs``, those still running (not zombies) at ``deadline`` (monotonic), waiting for each until then.

    ``is_running()`` compares the start time too: with pid_max at 32768 a busy machine reuses pids within seconds,
    and another program's new process under an old pid is not ours. A process in the middle of exiting no longer
    shows its environment (so :meth:`RunningRegion.processes` misses it) but still runs: this still sees it.
    """
    left = []
    for proc in procs:
        while proc.is_running() and _status(proc) != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
            time.sleep(0.1)
        if proc.is_running() and _status(proc) != psutil.STATUS_ZOMBIE:
            left.append(proc)
    return left


@dataclass
class RunningRegion:
    """The stand-in task, its work folder (its log, the workers' files, its TMPDIR) and its region's marker."""

    task: subprocess.Popen[bytes]
    work: Path
    marker: str
    started: float

    def processes(self) -> list[psutil.Process]:
        """The live processes of the region: every process whose environment carries the marker."""
        return processes.marked(MARKER_ENV, self.marker)

    def workers(self) -> int:
        return len(glob.glob(str(self.work / "worker-*")))

    def log(self) -> str:
        return (self.work / "harness.log").read_text(errors="replace")[-3000:]

    def secret_files(self) -> list[str]:
        """The launcher's secret properties files still in the stand-in's TMPDIR."""
        return sorted(glob.glob(str(self.work / "finegrained-conf-*" / "*")))

    def wait_for_workers(self, timeout_s: float = WORKERS_TIMEOUT_S) -> bool:
        """Until both Python workers run; False when the stand-in ended or the time ran out first."""
        deadline = time.monotonic() + timeout_s
        while self.workers() < WORKERS:
            if self.task.poll() is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.2)
        return True

    def kill(self) -> float:
        """SIGKILL to the stand-in task, as a worker's OOM killer or ``kill -9`` would; the moment it died."""
        self.task.kill()
        self.task.wait()
        return time.monotonic()

    def wait_gone(self, killed_at: float, within_s: float) -> tuple[list[psutil.Process], float]:
        """The region's processes still alive ``within_s`` after the kill (polled until none is left), and the
        seconds that polling took."""
        alive = self.processes()
        while alive and time.monotonic() - killed_at < within_s:
            time.sleep(0.1)
            alive = self.processes()
        return alive, time.monotonic() - killed_at

    def stop(self) -> list[psutil.Process]:
        """End the stand-in and whatever of its region still runs; returns the processes it had to end."""
        if self.task.poll() is None:
            self.kill()
        left = self.processes()
        for proc in left:
            proc.kill()
        return left


def start_region(work: Path, pythonpath: str, env: Mapping[str, str] | None = None) -> RunningRegion:
    """Start the stand-in task on the provider code at ``pythonpath``; its output goes to ``work/harness.log``."""
    marker = uuid.uuid4().hex
    # TMPDIR: the launcher's secret properties file is made there, where the trial can look for it.
    full_env = {
        **os.environ,
        **(env or {}),
        "PYTHONPATH": pythonpath,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "TMPDIR": str(work),
    }
    with open(work / "harness.log", "wb") as log:
        task = subprocess.Popen(
            [sys.executable, TASK, str(work), marker],
            env=full_env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return RunningRegion(task, work, marker, time.monotonic())


def kill_and_inspect(region: RunningRegion, record: TrialRecord, wait_s: float, moment: str) -> None:
    """SIGKILL the stand-in now and record, in ``record``, what its region held at the kill (``moment`` says
    when that was), what outlived it by ``wait_s`` seconds and what it left in its TMPDIR."""
    before = region.processes()
    workers = region.workers()
    killed = ProcessInfo(region.task.pid, "stand-in task", processes.cmdline(psutil.Process(region.task.pid)))
    killed_at = region.kill()
    record.killed = killed
    record.killed_tree = [processes.info(proc) for proc in before]
    record.seconds_to_kill = killed_at - region.started
    record.kill_moment = f"{moment}: {len(before)} process(es) of the region, {workers} Python worker(s)"
    alive, took = region.wait_gone(killed_at, wait_s)
    alive += [proc for proc in lingering(before, killed_at + wait_s) if proc not in alive]
    record.orphans = [processes.info(proc) for proc in alive]
    record.seconds_to_finish = took
    record.leftovers = [f"{Path(path).relative_to(region.work)} (secret properties)" for path in region.secret_files()]


def region_trial(
    number: int, run_id: str, moment: str, pythonpath: str, wait_s: float, work_root: Path, env: Mapping[str, str]
) -> TrialRecord:
    """One region trial: start the stand-in, reach ``moment``, then :func:`kill_and_inspect`."""
    record = TrialRecord(mode=REGION, trial=number, run_id=run_id, load_before=os.getloadavg()[0])
    work_root.mkdir(parents=True, exist_ok=True)
    region = start_region(Path(tempfile.mkdtemp(prefix="kill-trial-", dir=work_root)), pythonpath, env)
    try:
        after_workers, seconds = parse_moment(moment)
        if after_workers and not region.wait_for_workers():
            record.notes.append(f"fewer than {WORKERS} Python workers ran by the kill: {region.log()[-300:]!r}")
        time.sleep(seconds)
        if region.task.poll() is not None:
            record.notes.append(f"the stand-in task ended on its own ({region.task.returncode}) before the kill")
        else:
            after = "both Python workers ran" if after_workers else "the start"
            kill_and_inspect(region, record, wait_s, f"{seconds:g} s after {after}")
        return record
    finally:
        ended = region.stop()
        if ended:
            record.notes.append(f"the harness ended {len(ended)} orphan(s) after the trial")
        record.load_after = os.getloadavg()[0]
        shutil.rmtree(region.work, ignore_errors=True)
