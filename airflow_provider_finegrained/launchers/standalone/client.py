"""The standalone master's REST client on the Airflow side: a cluster-mode driver's state, its log, its kill.

The master's ``/json/`` names each driver's state and worker; the worker's ``/log/`` page serves the
driver's stdout and stderr. Killing a driver goes through Spark's own submission client
(``spark-class org.apache.spark.deploy.Client kill``), then ``/json/`` is polled until the driver, its
application and its executors are gone. The programs that run next to the driver stay in
``spark/standalone_driver.py``, which must import nothing but the standard library.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Mapping
from typing import Any

from airflow_provider_finegrained.launchers.http import HttpRequest, HttpRequestError, get_json, send
from airflow_provider_finegrained.launchers.master import parse_master
from airflow_provider_finegrained.spark.process import run_spark_submit
from airflow_provider_finegrained.spark.standalone_driver import DRIVER_ID_RE, final_state_in_output
from airflow_provider_finegrained.spark.submit import spark_home as find_spark_home

FINAL_DRIVER_STATES = frozenset({"FINISHED", "FAILED", "ERROR", "KILLED"})
DRIVER_STATES = ("SUBMITTED", "RUNNING", "RELAUNCHING", "UNKNOWN", *sorted(FINAL_DRIVER_STATES))
CLIENT_CLASS = "org.apache.spark.deploy.Client"

_APP_ID_RE = re.compile(r"Connected to Spark cluster with app ID (app-\d{14}-\d{4,})")
_LOG_HEADER_RE = re.compile(r"^==== Bytes \d+-\d+ of \d+ of .* ====\n?")


class DriverNotFoundError(LookupError):
    """The master does not know the driver (never submitted, or dropped from its history)."""


class DriverTimeoutError(TimeoutError):
    """The driver did not reach a final state in time."""

    def __init__(self, driver_id: str, last_state: str | None, timeout_s: float) -> None:
        super().__init__(f"driver {driver_id} is still {last_state} after {timeout_s:g} s")
        self.driver_id = driver_id
        self.last_state = last_state


class DriverKillError(RuntimeError):
    """The master refused or did not confirm the kill."""


def _check_driver_id(driver_id: str) -> None:
    if not DRIVER_ID_RE.fullmatch(driver_id):
        raise ValueError(
            f"driver_id: {driver_id!r} is not a standalone driver id; allowed: driver-<yyyyMMddHHmmss>-<n>"
        )


def master_json_url(webui_url: str) -> str:
    """The master's status URL (``…/json/``) from its web UI address, which may already be one."""
    base = webui_url.rstrip("/")
    return base + "/" if base.endswith("/json") else base + "/json/"


def _status(webui_json_url: str, timeout_s: float) -> Mapping[str, Any]:
    answer = get_json(master_json_url(webui_json_url), timeout_s)
    if not isinstance(answer, Mapping):
        raise ValueError(f"{webui_json_url} did not answer a JSON object")
    return answer


def find_driver(status: Mapping[str, Any], driver_id: str) -> Mapping[str, Any] | None:
    """The driver's entry in a master ``/json/`` answer (active drivers first), or None."""
    for key in ("activedrivers", "completeddrivers"):
        for driver in status.get(key) or []:
            if driver.get("id") == driver_id:
                return dict(driver)
    return None


def driver_state(webui_json_url: str, driver_id: str, timeout_s: float = 10.0) -> str | None:
    """The driver's state on the master (SUBMITTED, RUNNING, FINISHED, FAILED, ERROR, KILLED, …), or None."""
    _check_driver_id(driver_id)
    driver = find_driver(_status(webui_json_url, timeout_s), driver_id)
    return None if driver is None else str(driver.get("state"))


def wait_for_driver_end(webui_json_url: str, driver_id: str, timeout_s: float = 600.0, poll_s: float = 1.0) -> str:
    """Poll the master until the driver is FINISHED, FAILED, ERROR or KILLED; return that state."""
    _check_driver_id(driver_id)
    deadline = time.monotonic() + timeout_s
    state: str | None = None
    while True:
        state = driver_state(webui_json_url, driver_id)
        if state is None:
            raise DriverNotFoundError(f"the master at {webui_json_url} does not know driver {driver_id}")
        if state in FINAL_DRIVER_STATES:
            return state
        if time.monotonic() >= deadline:
            raise DriverTimeoutError(driver_id, state, timeout_s)
        time.sleep(poll_s)


def driver_log_url(
    webui_json_url: str, driver_id: str, log_type: str = "stdout", timeout_s: float = 10.0
) -> str | None:
    """Plain-text log URL of a driver on its worker's web UI (``/log/?driverId=…&logType=…``), or None.

    None when the master does not know the driver or it never got a worker.
    """
    _check_driver_id(driver_id)
    if log_type not in ("stdout", "stderr"):
        raise ValueError(f"log_type: {log_type!r}; allowed: 'stdout', 'stderr'")
    status = _status(webui_json_url, timeout_s)
    driver = find_driver(status, driver_id)
    worker_id = None if driver is None else driver.get("worker")
    for worker in status.get("workers") or []:
        if worker_id and worker.get("id") == worker_id:
            query = urllib.parse.urlencode({"driverId": driver_id, "logType": log_type})
            return f"{str(worker['webuiaddress']).rstrip('/')}/log/?{query}"
    return None


def read_driver_log(
    webui_json_url: str,
    driver_id: str,
    log_type: str = "stdout",
    max_bytes: int = 1 << 20,
    from_start: bool = False,
    timeout_s: float = 10.0,
) -> str:
    """Up to `max_bytes` of a driver's log from its worker: the end, or the beginning with `from_start`."""
    url = driver_log_url(webui_json_url, driver_id, log_type, timeout_s)
    if url is None:
        raise DriverNotFoundError(f"no worker of the master at {webui_json_url} holds logs of driver {driver_id}")
    url += f"&byteLength={max_bytes}" + ("&offset=0" if from_start else "")
    response = send(HttpRequest("GET", url), timeout_s)
    if response.status != 200:
        raise HttpRequestError(f"GET {url} answered HTTP {response.status}")
    return _LOG_HEADER_RE.sub("", response.body, count=1)


def driver_application_id(webui_json_url: str, driver_id: str, timeout_s: float = 10.0) -> str | None:
    """The application id (``app-…``) the driver registered, read from its log; None before it did."""
    with_log = read_driver_log(webui_json_url, driver_id, "stderr", from_start=True, timeout_s=timeout_s)
    match = _APP_ID_RE.search(with_log)
    return match.group(1) if match else None


def application_running(webui_json_url: str, app_id: str, timeout_s: float = 10.0) -> bool:
    """Whether the master lists `app_id` as active or any live worker still runs an executor of it."""
    status = _status(webui_json_url, timeout_s)
    if any(app.get("id") == app_id for app in status.get("activeapps") or []):
        return True
    for worker in status.get("workers") or []:
        if worker.get("state") != "ALIVE":
            continue
        try:
            answer = get_json(f"{str(worker['webuiaddress']).rstrip('/')}/json/", timeout_s)
        except HttpRequestError:
            continue  # a worker that went away runs nothing
        if any(executor.get("appid") == app_id for executor in answer.get("executors") or []):
            return True
    return False


def kill_driver(
    master_url: str,
    driver_id: str,
    spark_home: str | None = None,
    env: Mapping[str, str] | None = None,
    webui_json_url: str | None = None,
    timeout_s: float = 120.0,
) -> str:
    """Kill a cluster-mode driver with ``spark-class org.apache.spark.deploy.Client kill``; return its final state.

    With `webui_json_url` the master's ``/json/`` is polled until the driver has ended, its application
    is no longer active and no worker runs its executors. Without it the client itself is told to
    wait for the driver's end (it polls the master every 10 s), and the final state it logs is returned.
    A driver that had already ended is not an error: its final state is returned.
    """
    _check_driver_id(driver_id)
    if parse_master(master_url).kind != "standalone":
        raise ValueError(f"master_url: {master_url!r} is not a standalone master; allowed: spark://host:port")
    deadline = time.monotonic() + timeout_s
    app_id = None
    if webui_json_url is not None:
        state = driver_state(webui_json_url, driver_id)
        if state is None:
            raise DriverNotFoundError(f"the master at {webui_json_url} does not know driver {driver_id}")
        if state in FINAL_DRIVER_STATES:
            return state
        app_id = _quiet_application_id(webui_json_url, driver_id)

    home = find_spark_home(spark_home)
    run_env = dict(os.environ if env is None else env)
    run_env["SPARK_HOME"] = home
    if webui_json_url is None:
        # The client takes its settings from Java system properties; without waitAppCompletion it exits
        # after its first status poll (5 s), which may come before the kill has landed.
        options = run_env.get("JDK_JAVA_OPTIONS", "") + " -Dspark.standalone.submit.waitAppCompletion=true"
        run_env["JDK_JAVA_OPTIONS"] = options.strip()
    command = [os.path.join(home, "bin", "spark-class"), CLIENT_CLASS, "kill", master_url, driver_id]
    remaining = max(1.0, deadline - time.monotonic())
    result = run_spark_submit(command, run_env, on_line=lambda _line: None, timeout=remaining)
    accepted = any(f"Kill request for {driver_id} submitted" in line for line in result.tail)
    if webui_json_url is None:
        state = final_state_in_output(result.tail, driver_id)
        if result.returncode == 0 and state is not None:
            return state
    elif result.returncode == 0 and accepted:
        state = wait_for_driver_end(webui_json_url, driver_id, max(1.0, deadline - time.monotonic()))
        app_id = app_id or _quiet_application_id(webui_json_url, driver_id)
        while app_id is not None and application_running(webui_json_url, app_id):
            if time.monotonic() >= deadline:
                raise DriverKillError(f"driver {driver_id} is {state}, but application {app_id} still runs")
            time.sleep(0.5)
        return state
    elif (known := driver_state(webui_json_url, driver_id)) in FINAL_DRIVER_STATES:
        # It ended on its own between our look and the kill ("has already finished or does not exist").
        return str(known)
    raise DriverKillError(
        f"killing {driver_id} on {master_url} failed (exit {result.returncode}):\n" + "\n".join(result.tail[-15:])
    )


def _quiet_application_id(webui_json_url: str, driver_id: str) -> str | None:
    try:
        return driver_application_id(webui_json_url, driver_id)
    except (DriverNotFoundError, HttpRequestError):
        return None


_NOT_FOUND_EXIT = 3


def kill_detached(
    master_url: str,
    driver_id: str,
    spark_home: str | None = None,
    webui_json_url: str | None = None,
    timeout_s: float = 120.0,
) -> str:
    """:func:`kill_driver` in a process of its own session, which finishes the kill if this one is killed.

    Airflow's supervisor SIGKILLs a task a few seconds after telling it to stop (a run marked failed, a
    try superseded), sooner than Spark's submission client, a JVM, reaches the master: a kill run inside
    the task died with it and left the driver running. Same errors as :func:`kill_driver`.
    """
    _check_driver_id(driver_id)
    argv = [sys.executable, "-m", __name__, master_url, driver_id, "--timeout", str(timeout_s)]
    argv += ["--spark-home", spark_home] if spark_home else []
    argv += ["--json-url", webui_json_url] if webui_json_url else []
    done = subprocess.run(
        argv, capture_output=True, text=True, check=False, start_new_session=True, timeout=timeout_s + 60
    )
    message = (done.stderr.strip().splitlines() or ["no output"])[-1]
    if done.returncode == _NOT_FOUND_EXIT:
        raise DriverNotFoundError(message)
    if done.returncode != 0:
        raise DriverKillError(f"killing {driver_id} on {master_url} failed: {message}")
    return done.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    """``python -m ...launchers.standalone.client MASTER DRIVER_ID``: what :func:`kill_detached` runs."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("master_url")
    parser.add_argument("driver_id")
    parser.add_argument("--spark-home")
    parser.add_argument("--json-url")
    parser.add_argument("--timeout", type=float, default=120.0)
    args = parser.parse_args(argv)
    try:
        print(kill_driver(args.master_url, args.driver_id, args.spark_home, None, args.json_url, args.timeout))
    except DriverNotFoundError as exc:
        print(str(exc).replace("\n", " "), file=sys.stderr)
        return _NOT_FOUND_EXIT
    except (DriverKillError, HttpRequestError, OSError, ValueError) as exc:
        print(str(exc).replace("\n", " "), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
