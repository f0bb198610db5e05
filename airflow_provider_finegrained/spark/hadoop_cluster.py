"""A real Hadoop cluster on 127.0.0.1 (YARN and HDFS) for trying the provider out and for its tests.

One JVM runs a MiniDFSCluster (NameNode and DataNode, WebHDFS on) and a MiniYARNCluster (ResourceManager
and NodeManagers) from ``org.apache.hadoop:hadoop-client-minicluster`` at the Hadoop version pyspark
bundles (``hadoop_minicluster/LoopbackHadoop.java``, run with Java's single-file launcher). Its jars come
from Maven Central through ``mvn`` once and stay in the local Maven repository (``~/.m2``); the resolved
classpath is cached per Hadoop version under :func:`cache_dir`. ``work_dir/hadoop.json`` records what
was started, so another process can find and stop it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import subprocess
import time
from dataclasses import asdict, dataclass
from importlib import resources
from typing import Any

import psutil  # type: ignore[import-untyped, unused-ignore]

from airflow_provider_finegrained.launchers.http import get_json
from airflow_provider_finegrained.spark.java import SPARK_MODULE_OPTIONS, JavaInfo, check_java
from airflow_provider_finegrained.spark.maven import MavenError, cache_root, resolve_jars
from airflow_provider_finegrained.spark.process_tree import (
    ProcessTreeSurvivedError,
    terminate_processes,
    with_descendants,
)
from airflow_provider_finegrained.spark.state_file import read_state, write_state
from airflow_provider_finegrained.spark.submit import spark_home

STATE_FILE = "hadoop.json"
MAIN_CLASS = "LoopbackHadoop"
RESOURCES = "airflow_provider_finegrained.spark.hadoop_minicluster"


class HadoopClusterError(RuntimeError):
    """The Hadoop cluster could not be set up, started or stopped; the message says what to do."""


class HadoopClusterNotFoundError(FileNotFoundError):
    """No Hadoop cluster is recorded in the work directory."""


@dataclass(frozen=True)
class HadoopCluster:
    """A running loopback Hadoop cluster, as recorded in ``work_dir/hadoop.json``."""

    work_dir: str
    pid: int
    hadoop_version: str
    conf_dir: str
    """A client's HADOOP_CONF_DIR (core-, hdfs- and yarn-site.xml with the cluster's addresses)."""
    default_fs: str
    namenode_http_url: str
    resourcemanager_url: str
    resourcemanager_address: str
    nodemanagers: int
    vcores_per_node: int
    memory_mb_per_node: int
    log_file: str

    def storage_root(self, folder: str = "/finegrained") -> str:
        """An ``hdfs://`` storage root on this cluster."""
        return f"{self.default_fs.rstrip('/')}/{folder.strip('/')}"

    def status(self, timeout_s: float = 10.0) -> dict[str, Any]:
        """The ResourceManager's cluster metrics and nodes."""
        metrics = get_json(f"{self.resourcemanager_url}/ws/v1/cluster/metrics", timeout_s)
        nodes = get_json(f"{self.resourcemanager_url}/ws/v1/cluster/nodes", timeout_s)
        return {"metrics": metrics.get("clusterMetrics", {}), "nodes": (nodes.get("nodes") or {}).get("node", [])}

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop the services and every container they run; remove the state file."""
        try:
            terminate_processes(lambda: _cluster_processes(self), timeout_s, "the Hadoop cluster", kill_wait_s=10.0)
        except ProcessTreeSurvivedError as exc:
            raise HadoopClusterError(str(exc)) from None
        with contextlib.suppress(FileNotFoundError):
            os.remove(os.path.join(self.work_dir, STATE_FILE))


def bundled_hadoop_version(home: str | None = None) -> str:
    """The Hadoop client version in Spark's jars (``hadoop-client-api-<v>.jar``): 3.5.0 for pyspark 4.3."""
    jars = glob.glob(os.path.join(spark_home(home), "jars", "hadoop-client-api-*.jar"))
    if not jars:
        raise HadoopClusterError(f"Spark at {spark_home(home)} bundles no hadoop-client-api jar")
    return os.path.basename(sorted(jars)[-1]).removeprefix("hadoop-client-api-").removesuffix(".jar")


def cache_dir() -> str:
    """Where the resolved classpath is kept (outside any checkout), one folder per Hadoop version."""
    return os.path.join(cache_root(), "hadoop")


def resolve_classpath(version: str, timeout_s: float = 900.0) -> str:
    """The minicluster's classpath at Hadoop ``version``, fetched from Maven Central with ``mvn`` once.

    Maven keeps the jars in its local repository; the classpath is cached per version and resolved
    again when a jar it names is gone.
    """
    try:
        jars = resolve_jars(
            pom=resources.files(RESOURCES).joinpath("pom.xml"),
            properties={"hadoop.version": version},
            folder=os.path.join(cache_dir(), version),
            what=f"the Hadoop minicluster's jars (hadoop-client-minicluster {version})",
            timeout_s=timeout_s,
        )
    except MavenError as exc:
        raise HadoopClusterError(str(exc)) from None
    return os.pathsep.join(jars)


def start_hadoop_cluster(
    work_dir: str,
    nodemanagers: int = 2,
    vcores_per_node: int = 2,
    memory_mb_per_node: int = 4096,
    min_allocation_mb: int = 256,
    small_queue_percent: int = 25,
    timeout_s: float = 180.0,
    host: str = "127.0.0.1",
) -> HadoopCluster:
    """Start HDFS and YARN on 127.0.0.1 with state under ``work_dir``; return once every service is up.

    The scheduler has two queues: ``default`` and ``small`` (``small_queue_percent`` of the cluster), so a
    queue too small for a region can be had on purpose. What was started is stopped again if start-up fails.
    ``host``: the address other hosts reach HDFS at (YARN stays on 127.0.0.1); ``nodemanagers=0``: HDFS
    alone, without YARN.
    """
    _check_sizes(nodemanagers, vcores_per_node, memory_mb_per_node, min_allocation_mb, small_queue_percent)
    work_dir = os.path.abspath(work_dir)
    if os.path.exists(os.path.join(work_dir, STATE_FILE)):
        raise HadoopClusterError(f"a cluster is already recorded in {work_dir}; stop it first")
    java = check_java()
    version = bundled_hadoop_version()
    classpath = resolve_classpath(version)
    _clear_leftovers(work_dir)
    log_file = os.path.join(work_dir, "logs", "hadoop.log")
    sizes = (nodemanagers, vcores_per_node, memory_mb_per_node, min_allocation_mb, small_queue_percent)
    process = _launch(java, classpath, work_dir, log_file, [*map(str, sizes), host])
    deadline = time.monotonic() + timeout_s
    found = _wait_for_properties(process, os.path.join(work_dir, "cluster.properties"), log_file, deadline)
    cluster = HadoopCluster(
        work_dir=work_dir,
        pid=process.pid,
        hadoop_version=version,
        conf_dir=os.path.join(work_dir, "conf"),
        default_fs=found["fs.defaultFS"],
        namenode_http_url=found["namenode.http"],
        resourcemanager_url=found.get("resourcemanager.webapp", ""),
        resourcemanager_address=found.get("resourcemanager.address", ""),
        nodemanagers=nodemanagers,
        vcores_per_node=vcores_per_node,
        memory_mb_per_node=memory_mb_per_node,
        log_file=log_file,
    )
    if nodemanagers:
        _wait_for_nodes(cluster, deadline)
    write_state(os.path.join(work_dir, STATE_FILE), asdict(cluster))
    return cluster


def _check_sizes(
    nodemanagers: int, vcores_per_node: int, memory_mb_per_node: int, min_allocation_mb: int, small_queue_percent: int
) -> None:
    """ValueError naming the first size below what the services accept."""
    for name, value, least in (
        ("nodemanagers", nodemanagers, 0),
        ("vcores_per_node", vcores_per_node, 1),
        ("memory_mb_per_node", memory_mb_per_node, 512),
        ("min_allocation_mb", min_allocation_mb, 64),
        ("small_queue_percent", small_queue_percent, 1),
    ):
        if value < least:
            raise ValueError(f"{name}: {value} is too small; allowed: at least {least}")
    if small_queue_percent >= 100:
        raise ValueError(f"small_queue_percent: {small_queue_percent}; allowed: 1 to 99")


def _clear_leftovers(work_dir: str) -> None:
    """Remove what an earlier cluster in ``work_dir`` left: a fresh NameNode is formatted on every start."""
    for leftover in ("conf", "dfs", "tmp"):
        shutil.rmtree(os.path.join(work_dir, leftover), ignore_errors=True)
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(work_dir, "cluster.properties"))
    os.makedirs(os.path.join(work_dir, "logs"), exist_ok=True)


def _launch(java: JavaInfo, classpath: str, work_dir: str, log_file: str, args: list[str]) -> subprocess.Popen[bytes]:
    """Start the services' JVM (``LoopbackHadoop.java`` with ``args``), its output appended to ``log_file``."""
    source = resources.files(RESOURCES)
    env = dict(os.environ)
    # The NodeManagers start containers with the JAVA_HOME they inherit.
    env["JAVA_HOME"] = java.java_home or os.path.dirname(os.path.dirname(os.path.realpath(java.executable)))
    env.pop("JAVA_TOOL_OPTIONS", None)  # a test harness's JIT flags are not meant for the services
    command = [
        java.executable,
        "-Xmx1g",
        *SPARK_MODULE_OPTIONS,  # Hadoop's services need the same opens
        f"-Dlog4j.configuration=file:{source.joinpath('log4j.properties')}",
        "-cp",
        classpath,
        str(source.joinpath(f"{MAIN_CLASS}.java")),
        work_dir,
        *args,
    ]
    with open(log_file, "ab") as log:
        # A session of its own: the cluster outlives this process and a Ctrl-C at our terminal.
        return subprocess.Popen(
            command, env=env, cwd=work_dir, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip


def _wait_for_properties(
    process: subprocess.Popen[bytes], properties: str, log_file: str, deadline: float
) -> dict[str, str]:
    """The addresses the services wrote to ``properties`` once up; the JVM is stopped if it exits or times out."""
    while not os.path.exists(properties):
        if process.poll() is not None or time.monotonic() > deadline:
            what = f"exited with {process.returncode}" if process.returncode is not None else "timed out"
            with contextlib.suppress(ProcessTreeSurvivedError, psutil.NoSuchProcess):  # NoSuchProcess: it exited
                terminate_processes(lambda: with_descendants([psutil.Process(process.pid)]), 30, "start-up")
            raise HadoopClusterError(f"the Hadoop cluster {what} during start-up; see {log_file}:\n{_tail(log_file)}")
        time.sleep(0.25)
    return _read_properties(properties)


def _wait_for_nodes(cluster: HadoopCluster, deadline: float) -> None:
    while True:
        try:
            running = [n for n in cluster.status()["nodes"] if n.get("state") == "RUNNING"]
        except Exception:  # the web server may still be starting
            running = []
        if len(running) >= cluster.nodemanagers:
            return
        if time.monotonic() > deadline:
            cluster.stop()
            raise HadoopClusterError(f"{len(running)} of {cluster.nodemanagers} NodeManagers registered in time")
        time.sleep(0.5)


def _read_properties(path: str) -> dict[str, str]:
    """A Java properties file as written by ``Properties.store`` (``key=value``, ``\\`` escapes)."""
    found: dict[str, str] = {}
    with open(path, encoding="latin-1") as handle:
        for line in handle:
            if line.startswith("#") or "=" not in line:
                continue
            key, _, value = line.rstrip("\n").partition("=")
            found[key.replace("\\", "")] = value.replace("\\", "")
    return found


def _tail(path: str, lines: int = 20) -> str:
    with contextlib.suppress(FileNotFoundError), open(path, encoding="utf-8", errors="replace") as handle:
        return "\n".join(handle.read().splitlines()[-lines:])
    return ""


def _cluster_processes(cluster: HadoopCluster) -> list[psutil.Process]:
    """The cluster's JVM, its containers, and any container that outlived it (found by its working folder).

    NodeManagers start containers in sessions of their own, so a container whose NodeManager died is no
    longer a descendant; it still runs inside the cluster's work directory.
    """
    found: dict[int, psutil.Process] = {}
    with contextlib.suppress(psutil.Error):
        proc = psutil.Process(cluster.pid)
        if MAIN_CLASS in " ".join(proc.cmdline()):
            found[proc.pid] = proc
    prefix = cluster.work_dir + os.sep
    for proc in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            if proc.pid not in found and proc.cwd().startswith(prefix):
                found[proc.pid] = proc
    return with_descendants(found.values())


def load_hadoop_cluster(work_dir: str) -> HadoopCluster:
    """The cluster recorded in ``work_dir/hadoop.json``; HadoopClusterNotFoundError if there is none."""
    path = os.path.join(os.path.abspath(work_dir), STATE_FILE)
    hint = f"start one with `hadoop start --dir {work_dir}`"
    return read_state(HadoopCluster, path, HadoopClusterNotFoundError(f"no Hadoop cluster state in {path}; {hint}"))
