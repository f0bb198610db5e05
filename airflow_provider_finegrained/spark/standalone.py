"""A Spark standalone cluster on 127.0.0.1 from the installed Spark (the pip package works): start, find, stop.

The master and workers are started with ``sbin/spark-daemon.sh`` (the pip package has no
``start-master.sh``), on free ports, with logs, pid files and worker directories under one work
directory. ``work_dir/cluster.json`` records what was started, so another process can find and stop it.

This module is the cluster once it runs: its record, its processes, stopping it. Starting it is in
``spark.standalone_start``.
"""

from __future__ import annotations

import contextlib
import glob
import os
import signal
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import psutil  # type: ignore[import-untyped, unused-ignore]

from airflow_provider_finegrained.launchers.http import HttpRequestError, get_json
from airflow_provider_finegrained.spark.process_tree import (
    ProcessTreeSurvivedError,
    live,
    signal_processes,
    terminate_processes,
    wait_gone,
    with_descendants,
)
from airflow_provider_finegrained.spark.state_file import read_state, write_state

STATE_FILE = "cluster.json"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# The JVMs a worker launches for applications: they belong to the cluster and die with it.
APPLICATION_CLASSES = (
    "org.apache.spark.executor.CoarseGrainedExecutorBackend",
    "org.apache.spark.deploy.worker.DriverWrapper",
)
IDENT = "finegrained"
"""SPARK_IDENT_STRING: names the daemons' pid and log files."""
HOST = "127.0.0.1"


class ClusterStartError(RuntimeError):
    """The cluster did not come up; what was started has been stopped."""


class ClusterStopError(RuntimeError):
    """Processes of the cluster survived SIGKILL."""


class ClusterNotFoundError(FileNotFoundError):
    """No cluster state file in the work directory."""


@dataclass(frozen=True)
class StandaloneCluster:
    """A running local standalone cluster, as recorded in ``work_dir/cluster.json``."""

    work_dir: str
    master_url: str
    webui_url: str
    master_pid: int
    worker_pids: tuple[int, ...]
    worker_webui_urls: tuple[str, ...]
    worker_urls: tuple[str, ...] = ()
    """RPC addresses (``spark://Worker@127.0.0.1:port``); executors and drivers name theirs."""
    worker_dirs: tuple[str, ...] = ()
    spark_home: str = ""
    cores_per_worker: int = 0
    memory_per_worker: str = ""

    @property
    def json_url(self) -> str:
        """The master's status page (``/json/``)."""
        return f"{self.webui_url}/json/"

    @property
    def pid_dir(self) -> str:
        return os.path.join(self.work_dir, "pids")

    @property
    def log_dir(self) -> str:
        return os.path.join(self.work_dir, "logs")

    def status(self, timeout_s: float = 10.0) -> dict[str, Any]:
        """The master's ``/json/`` answer (workers, apps, drivers, status)."""
        answer = get_json(self.json_url, timeout_s)
        if not isinstance(answer, dict):
            raise HttpRequestError(f"{self.json_url} did not answer a JSON object: {answer!r:.200}")
        return answer

    def processes(self, worker: int | None = None) -> list[psutil.Process]:
        """Live processes of the cluster (or of one worker): daemons, executors, drivers and their children."""
        return live(_cluster_processes(self, worker))

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM every process of the cluster, SIGKILL what is left after `timeout_s`; remove the state file.

        Raises ClusterStopError if anything survives.
        """
        _terminate(lambda: _cluster_processes(self, None), timeout_s, "cluster in " + self.work_dir)
        remove_pid_files(self.pid_dir)
        state = os.path.join(self.work_dir, STATE_FILE)
        with contextlib.suppress(FileNotFoundError, ClusterNotFoundError, ValueError):
            if load_cluster(self.work_dir).master_url == self.master_url:
                os.remove(state)

    def kill_worker(self, index: int, timeout_s: float = 10.0) -> None:
        """SIGKILL worker `index` and every executor and driver it runs, as if its machine were lost."""
        if not 0 <= index < len(self.worker_pids):
            raise IndexError(f"index: worker {index} does not exist; allowed: 0..{len(self.worker_pids) - 1}")
        procs = live(_cluster_processes(self, index))
        signal_processes(procs, signal.SIGKILL)
        survivors = wait_gone(procs, timeout_s)
        if survivors:
            raise ClusterStopError(f"worker {index} processes {[p.pid for p in survivors]} survived SIGKILL")


def verified_daemon(pid: int, marker: str) -> psutil.Process | None:
    """The process `pid` if it is alive and its command line names `marker` (a recycled pid would not)."""
    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(pid)
        if marker in proc.cmdline():
            return proc
    return None


def _cluster_processes(cluster: StandaloneCluster, worker: int | None) -> list[psutil.Process]:
    """Daemons, plus every process that inherited the cluster's environment or names one of its workers.

    Matching the environment (SPARK_PID_DIR, or SPARK_WORKER_DIR for one worker) rather than the working
    directory keeps a user's shell that merely sits in the work directory out of it.
    """
    if worker is None:
        daemons = [(cluster.master_pid, MASTER_CLASS), *((pid, WORKER_CLASS) for pid in cluster.worker_pids)]
        env_key, env_value = "SPARK_PID_DIR", cluster.pid_dir
        worker_urls = set(cluster.worker_urls)
    else:
        daemons = [(cluster.worker_pids[worker], WORKER_CLASS)]
        env_key = "SPARK_WORKER_DIR"
        env_value = cluster.worker_dirs[worker] if cluster.worker_dirs else ""
        worker_urls = {cluster.worker_urls[worker]} if cluster.worker_urls else set()
    found: dict[int, psutil.Process] = {}
    for pid, marker in daemons:
        if (proc := verified_daemon(pid, marker)) is not None:
            found[proc.pid] = proc
    for proc in psutil.process_iter():
        if proc.pid in found:
            continue
        with contextlib.suppress(psutil.Error):
            if env_value and proc.environ().get(env_key) == env_value:
                found[proc.pid] = proc
                continue
            cmdline = proc.cmdline()
            if any(c in cmdline for c in APPLICATION_CLASSES) and any(u in cmdline for u in worker_urls):
                found[proc.pid] = proc
    return with_descendants(found.values())


def _terminate(find: Callable[[], list[psutil.Process]], timeout_s: float, what: str) -> None:
    try:
        terminate_processes(find, timeout_s, what, kill_wait_s=10.0)
    except ProcessTreeSurvivedError as exc:
        raise ClusterStopError(str(exc)) from None


def remove_pid_files(pid_dir: str) -> None:
    """Remove the daemons' pid files once they are gone (as ``spark-daemon.sh stop`` does).

    spark-daemon.sh refuses to start a daemon whose pid file names a process called java, and a
    stopped daemon stays a java zombie until init reaps it, which can take seconds.
    """
    for path in glob.glob(os.path.join(pid_dir, f"spark-{IDENT}-*.pid")):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def write_cluster_state(cluster: StandaloneCluster) -> None:
    """Record ``cluster`` in ``work_dir/cluster.json``, with its ports, for :func:`load_cluster`."""
    state = asdict(cluster)
    state["ports"] = {
        "master": int(cluster.master_url.rsplit(":", 1)[1]),
        "webui": int(cluster.webui_url.rsplit(":", 1)[1]),
        "workers": [int(url.rsplit(":", 1)[1]) for url in cluster.worker_urls],
        "worker_webuis": [int(url.rsplit(":", 1)[1]) for url in cluster.worker_webui_urls],
    }
    write_state(os.path.join(cluster.work_dir, STATE_FILE), state)


def load_cluster(work_dir: str) -> StandaloneCluster:
    """The cluster recorded in ``work_dir/cluster.json``; ClusterNotFoundError if there is none."""
    path = os.path.join(os.path.abspath(work_dir), STATE_FILE)
    missing = ClusterNotFoundError(f"no cluster state in {path}; start one with `cluster start --dir {work_dir}`")
    return read_state(StandaloneCluster, path, missing)


def stop_local_cluster(work_dir: str, timeout_s: float = 30.0) -> None:
    """Stop the cluster recorded in `work_dir` and remove its state file."""
    load_cluster(work_dir).stop(timeout_s)
