"""Kill trials: start ``region_task.py`` (a stand-in task running a real local region), SIGKILL it after a
delay, and time until every process of the region has ended.

``python -m tests.chaos.region DELAYS [PYTHONPATH]``: DELAYS is a comma-separated list of seconds
after the start (``5``), or after both Python workers are running (``w2``). PYTHONPATH (default: this
checkout) names the code under test, e.g. an older checkout unpacked with ``git archive`` to reproduce.
Prints one line per trial and ``N of M trials left no process``; exits 1 if any left one.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psutil

from tests.chaos.region_task import MARKER_ENV

HARNESS = str(Path(__file__).with_name("region_task.py"))
REPO_ROOT = str(Path(__file__).resolve().parents[2])
GONE_WITHIN_S = 10.0
WORKERS_TIMEOUT_S = 240.0


def marked(marker: str) -> list[psutil.Process]:
    """The live processes whose environment carries ``marker``."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(MARKER_ENV) == marker and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except psutil.Error:
            continue
    return found


def trial(delay: str, pythonpath: str) -> tuple[bool, str]:
    """One trial; whether it left no process, and its line for the table."""
    work = tempfile.mkdtemp(prefix="kill-trial-")
    marker = uuid.uuid4().hex
    env = {**os.environ, "PYTHONPATH": pythonpath, "SPARK_LOCAL_IP": "127.0.0.1", "TMPDIR": work}
    with open(os.path.join(work, "harness.log"), "wb") as log:
        harness = subprocess.Popen(
            [sys.executable, HARNESS, work, marker],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    if delay.startswith("w"):
        started = time.monotonic()
        while len(glob.glob(os.path.join(work, "worker-*"))) < 2 and time.monotonic() - started < WORKERS_TIMEOUT_S:
            time.sleep(0.2)
        time.sleep(float(delay[1:]))
    else:
        time.sleep(float(delay))
    before = sorted(proc.name() for proc in marked(marker))
    workers = len(glob.glob(os.path.join(work, "worker-*")))
    os.kill(harness.pid, signal.SIGKILL)
    harness.wait()
    killed_at = time.monotonic()
    alive = marked(marker)
    while alive and time.monotonic() - killed_at < GONE_WITHIN_S:
        time.sleep(0.1)
        alive = marked(marker)
    took = time.monotonic() - killed_at
    left = bool(glob.glob(os.path.join(work, "finegrained-conf-*", "*")))
    for proc in alive:
        proc.kill()
    shutil.rmtree(work, ignore_errors=True)
    outcome = f"gone in {took:.2f} s" if not alive else f"ORPHANS {[(p.pid, p.name()) for p in alive]}"
    return not alive, (
        f"kill at {delay:>5} s: {len(before)} processes {before}, {workers} workers -> {outcome}; "
        f"secret file left: {left}"
    )


def main(argv: list[str]) -> int:
    delays = argv[1].split(",")
    pythonpath = argv[2] if len(argv) > 2 else REPO_ROOT
    clean = 0
    for number, delay in enumerate(delays, 1):
        ok, line = trial(delay, pythonpath)
        clean += ok
        print(f"trial {number:2d} {line}", flush=True)
    print(f"{clean} of {len(delays)} trials left no process")
    return 0 if clean == len(delays) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
