"""The two small programs behind standalone cluster mode for Python applications.

* ``python -m airflow_provider_finegrained.spark.standalone_driver submit -- <spark-submit …>`` runs
  spark-submit and exits non-zero unless the driver ended FINISHED: Spark's submission client waits for
  the driver but exits 0 whatever its final state (FAILED, ERROR and KILLED included).
* ``python standalone_driver.py run <app.py> [args…]`` is what PythonRunner starts on the worker: it
  runs the application and ends it when its driver JVM goes away. Spark kills only the JVM when a
  driver is killed; without this the Python process would run on as an orphan.

Copied to the cluster and run there as a plain file, it imports nothing but the standard library. The
Airflow side's client of the master (driver state, log, kill) is ``launchers.standalone.client``.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any

DRIVER_ID_RE = re.compile(r"driver-\d{14}-\d{4,}")
# Logged by Spark's submission client (ClientEndpoint) when it stops following a driver.
_FINAL_STATE_RE = re.compile(r"State of driver (driver-\d{14}-\d{4,}) is ([A-Z]+), exiting")


def final_state_in_output(lines: Sequence[str], driver_id: str | None = None) -> str | None:
    """The final driver state Spark's submission client logged (``State of driver … is X, exiting``)."""
    for line in reversed(lines):
        match = _FINAL_STATE_RE.search(line)
        if match and driver_id in (None, match.group(1)):
            return match.group(2)
    return None


# -- the programs ----------------------------------------------------------------------------------

_EXIT_DRIVER_FAILED = 1


def submit_and_wait(command: Sequence[str]) -> int:
    """Run spark-submit, echo its output, and return 0 only if the driver it followed ended FINISHED."""
    child = subprocess.Popen(list(command), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    def forward(signum: int, _frame: Any) -> None:
        child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)
    driver_id = state = None
    assert child.stdout is not None
    for raw in iter(child.stdout.readline, b""):
        line = raw.decode("utf-8", errors="replace")
        sys.stdout.write(line)
        sys.stdout.flush()
        if driver_id is None and (match := DRIVER_ID_RE.search(line)):
            driver_id = match.group(0)
        state = final_state_in_output([line]) or state
    returncode = child.wait()
    if returncode != 0:
        return returncode
    if state is not None and state != "FINISHED":
        print(f"[finegrained] driver {driver_id} ended in state {state}", flush=True)
        return _EXIT_DRIVER_FAILED
    return 0


def _exit_with_parent(poll_s: float = 0.5, grace_s: float = 10.0) -> None:
    """End this process once its parent (the driver JVM) is gone: SIGTERM, then a hard exit after `grace_s`."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll_s)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace_s)
        os._exit(128 + signal.SIGKILL)

    threading.Thread(target=watch, name="exit-with-driver-jvm", daemon=True).start()


def run_application(argv: Sequence[str]) -> None:
    """Run a Python application as ``__main__`` (as ``python app.py args…`` would), bound to the parent's life."""
    import runpy

    application = os.path.abspath(argv[0])
    sys.argv = [application, *argv[1:]]
    # Run as a script, this file put its own folder first on sys.path; the application expects its own.
    sys.path[0] = os.path.dirname(application)
    _exit_with_parent()
    runpy.run_path(application, run_name="__main__")


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    usage = f"usage: {os.path.basename(__file__)} submit -- <spark-submit command…> | run <app.py> [args…]"
    if len(args) >= 2 and args[0] == "run":
        run_application(args[1:])
        return 0
    if len(args) >= 3 and args[:2] == ["submit", "--"]:
        return submit_and_wait(args[2:])
    print(usage, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
