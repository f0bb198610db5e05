"""Starting a Spark standalone cluster on 127.0.0.1: a master and workers through ``sbin/spark-daemon.sh``.

Ports are picked free and the ports actually bound read back from the daemons' logs; the cluster is
recorded in ``work_dir/cluster.json`` (``spark.standalone``) once every worker is ALIVE.
"""

from __future__ import annotations

import contextlib
import glob
import os
import re
import socket
import subprocess
import time
from collections.abc import Callable, Mapping
from typing import Any

import psutil  # type: ignore[import-untyped, unused-ignore]

from airflow_provider_finegrained.launchers.http import HttpRequestError, get_json
from airflow_provider_finegrained.spark.java import check_java
from airflow_provider_finegrained.spark.standalone import (
    HOST,
    IDENT,
    MASTER_CLASS,
    WORKER_CLASS,
    ClusterNotFoundError,
    ClusterStartError,
    ClusterStopError,
    StandaloneCluster,
    load_cluster,
    remove_pid_files,
    verified_daemon,
    write_cluster_state,
)
from airflow_provider_finegrained.spark.submit import spark_home as find_spark_home
from airflow_provider_finegrained.spark.submit import without_connect_client

_MEMORY_RE = re.compile(r"[1-9]\d*[mg]", re.IGNORECASE)
_MASTER_URL_RE = re.compile(r"Starting Spark master at (spark://\S+)")
_MASTER_UI_RE = re.compile(r"Successfully started service 'MasterUI' on port (\d+)")
_WORKER_PORT_RE = re.compile(r"Successfully started service 'sparkWorker' on port (\d+)")


def _free_port() -> int:
    # Ports are picked by the kernel; Spark moves to the next port if one is taken meanwhile, and the
    # ports actually bound are read back from the daemons' logs.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _log_file(log_dir: str, cls: str, instance: int) -> str | None:
    matches = sorted(glob.glob(os.path.join(log_dir, f"spark-{IDENT}-{cls}-{instance}-*.out")))
    return matches[-1] if matches else None


def _read(path: str | None) -> str:
    if path is None:
        return ""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except FileNotFoundError:
        return ""


def _log_tails(log_dir: str, lines: int = 15) -> str:
    parts = []
    for path in sorted(glob.glob(os.path.join(log_dir, "*"))):
        tail = _read(path).splitlines()[-lines:]
        parts.append(f"--- {path} (last {len(tail)} lines)\n" + "\n".join(tail))
    return "\n".join(parts) or f"(no logs in {log_dir})"


def _pid_from_file(pid_dir: str, cls: str, instance: int) -> int | None:
    try:
        with open(os.path.join(pid_dir, f"spark-{IDENT}-{cls}-{instance}.pid"), encoding="utf-8") as handle:
            return int(handle.read().strip())
    except (FileNotFoundError, ValueError):
        return None


def _launch(home: str, env: Mapping[str, str], args: list[str], cwd: str, launcher_log: str) -> subprocess.Popen[bytes]:
    with open(launcher_log, "ab") as log:
        # A session of its own: the daemon outlives this process and a Ctrl-C at our terminal.
        return subprocess.Popen(
            [os.path.join(home, "sbin", "spark-daemon.sh"), "start", *args],
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _wait_for(
    pattern: re.Pattern[str], path_of: Callable[[], str | None], deadline: float, pid: int | None, what: str
) -> str:
    while time.monotonic() < deadline:
        if match := pattern.search(_read(path_of())):
            return match.group(1)
        if pid is not None and not psutil.pid_exists(pid):
            raise ClusterStartError(f"{what} exited during start-up")
        time.sleep(0.2)
    raise ClusterStartError(f"{what} did not log {pattern.pattern!r} in time")


def start_local_cluster(
    work_dir: str,
    workers: int = 2,
    cores_per_worker: int = 2,
    memory_per_worker: str = "4g",
    timeout_s: float = 120.0,
) -> StandaloneCluster:
    """Start a master and `workers` workers on 127.0.0.1 and wait until all are ALIVE.

    On failure or timeout everything started is stopped and ClusterStartError carries the log tails.
    """
    if workers < 1:
        raise ValueError(f"workers: {workers} must be at least 1")
    if cores_per_worker < 1:
        raise ValueError(f"cores_per_worker: {cores_per_worker} must be at least 1")
    if not _MEMORY_RE.fullmatch(memory_per_worker):
        raise ValueError(f"memory_per_worker: {memory_per_worker!r} is not a size; allowed: e.g. '512m', '4g'")
    work_dir = os.path.abspath(work_dir)
    with contextlib.suppress(ClusterNotFoundError, ValueError):
        existing = load_cluster(work_dir)
        if verified_daemon(existing.master_pid, MASTER_CLASS) is not None:
            raise ClusterStartError(f"a cluster already runs in {work_dir} ({existing.master_url}); stop it first")
    check_java()
    home = find_spark_home()
    # No cluster runs here (checked above), so pid files left by a crash or a kill are stale.
    remove_pid_files(os.path.join(work_dir, "pids"))
    if not os.path.isfile(os.path.join(home, "sbin", "spark-daemon.sh")):
        raise ClusterStartError(f"{home} has no sbin/spark-daemon.sh; set SPARK_HOME to a Spark installation")
    deadline = time.monotonic() + timeout_s
    log_dir, pid_dir = os.path.join(work_dir, "logs"), os.path.join(work_dir, "pids")
    worker_dirs = tuple(os.path.join(work_dir, f"worker-{i}") for i in range(1, workers + 1))
    for path in (log_dir, pid_dir, *worker_dirs):
        os.makedirs(path, exist_ok=True)
    properties = os.path.join(work_dir, "master.properties")
    with open(properties, "w", encoding="utf-8") as handle:
        # The REST submission server would open port 6066, which other clusters on this machine may hold.
        handle.write("spark.master.rest.enabled false\n")
    env = without_connect_client(os.environ)
    env.pop("SPARK_NO_DAEMONIZE", None)  # spark-daemon.sh would run the daemon in the foreground
    env.update(
        SPARK_HOME=home,
        SPARK_LOG_DIR=log_dir,
        SPARK_PID_DIR=pid_dir,
        SPARK_LOCAL_IP=HOST,
        SPARK_IDENT_STRING=IDENT,
    )
    launcher_log = os.path.join(log_dir, "launcher.log")
    partial = StandaloneCluster(work_dir, "", "", 0, (), (), worker_dirs=worker_dirs, spark_home=home)
    try:
        cluster = _start(home, env, work_dir, launcher_log, worker_dirs, cores_per_worker, memory_per_worker, deadline)
    except BaseException as exc:
        try:
            partial.stop(timeout_s=10.0)
        except ClusterStopError as stop_exc:
            exc.add_note(str(stop_exc))
        if isinstance(exc, ClusterStartError):
            raise ClusterStartError(f"{exc}\n{_log_tails(log_dir)}") from None
        raise
    write_cluster_state(cluster)
    return cluster


def _start(
    home: str,
    env: Mapping[str, str],
    work_dir: str,
    launcher_log: str,
    worker_dirs: tuple[str, ...],
    cores: int,
    memory: str,
    deadline: float,
) -> StandaloneCluster:
    log_dir, pid_dir = env["SPARK_LOG_DIR"], env["SPARK_PID_DIR"]
    args = ["--host", HOST, "--port", str(_free_port()), "--webui-port", str(_free_port())]
    args += ["--properties-file", os.path.join(work_dir, "master.properties")]
    launcher = _launch(home, env, [MASTER_CLASS, "1", *args], work_dir, launcher_log)
    if launcher.wait(timeout=max(1.0, deadline - time.monotonic())) != 0:
        raise ClusterStartError(f"spark-daemon.sh start {MASTER_CLASS} exited with {launcher.returncode}")
    master_pid = _pid_from_file(pid_dir, MASTER_CLASS, 1)
    if master_pid is None:
        raise ClusterStartError("the master wrote no pid file")

    def master_log() -> str | None:
        return _log_file(log_dir, MASTER_CLASS, 1)

    master_url = _wait_for(_MASTER_URL_RE, master_log, deadline, master_pid, "the master")
    webui_url = f"http://{HOST}:{_wait_for(_MASTER_UI_RE, master_log, deadline, master_pid, 'the master')}"

    launchers = []
    for i, worker_dir in enumerate(worker_dirs, start=1):
        worker_args = ["--host", HOST, "--port", str(_free_port()), "--cores", str(cores), "--memory", memory]
        worker_args += ["--webui-port", str(_free_port()), master_url]
        worker_env = {**env, "SPARK_WORKER_DIR": worker_dir}
        launchers.append(_launch(home, worker_env, [WORKER_CLASS, str(i), *worker_args], work_dir, launcher_log))
    # spark-daemon.sh sleeps about 2.5 s after each launch; starting them together pays that once.
    for i, proc in enumerate(launchers, start=1):
        if proc.wait(timeout=max(1.0, deadline - time.monotonic())) != 0:
            raise ClusterStartError(f"spark-daemon.sh start {WORKER_CLASS} {i} exited with {proc.returncode}")
    worker_pids: list[int] = []
    worker_ports: list[int] = []
    for i in range(1, len(worker_dirs) + 1):
        pid = _pid_from_file(pid_dir, WORKER_CLASS, i)
        if pid is None:
            raise ClusterStartError(f"worker {i} wrote no pid file")
        worker_pids.append(pid)

        def worker_log(i: int = i) -> str | None:
            return _log_file(log_dir, WORKER_CLASS, i)

        worker_ports.append(int(_wait_for(_WORKER_PORT_RE, worker_log, deadline, pid, f"worker {i}")))

    webuis = _wait_until_alive(f"{webui_url}/json/", worker_ports, deadline, [master_pid, *worker_pids])
    return StandaloneCluster(
        work_dir=work_dir,
        master_url=master_url,
        webui_url=webui_url,
        master_pid=master_pid,
        worker_pids=tuple(worker_pids),
        worker_webui_urls=tuple(webuis[port] for port in worker_ports),
        worker_urls=tuple(f"spark://Worker@{HOST}:{port}" for port in worker_ports),
        worker_dirs=worker_dirs,
        spark_home=env["SPARK_HOME"],
        cores_per_worker=cores,
        memory_per_worker=memory,
    )


def _wait_until_alive(json_url: str, worker_ports: list[int], deadline: float, pids: list[int]) -> dict[int, str]:
    """Wait for the master to be ALIVE with every worker ALIVE; return each worker's web UI by RPC port."""
    last: Any = None
    while time.monotonic() < deadline:
        for pid in pids:
            if not psutil.pid_exists(pid):
                raise ClusterStartError(f"daemon {pid} exited during start-up; last master status: {last!r:.500}")
        with contextlib.suppress(HttpRequestError, ValueError):
            last = get_json(json_url, timeout_s=5.0)
            alive = {
                int(w["port"]): str(w["webuiaddress"])
                for w in last.get("workers", [])
                if w.get("state") == "ALIVE" and w.get("host") == HOST
            }
            if last.get("status") == "ALIVE" and all(port in alive for port in worker_ports):
                return {port: alive[port] for port in worker_ports}
        time.sleep(0.5)
    raise ClusterStartError(f"the master did not report all workers ALIVE in time; last status: {last!r:.500}")
