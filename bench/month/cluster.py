"""Where the month runs: the loopback YARN and HDFS (``finegrained hadoop start``), or the loopback standalone
cluster (``finegrained cluster start``), and the other tenant's steady application on it.

Both are started through the provider's command line, as a user starts them; the YARN target takes the
connection ``hadoop start`` prints. Every NodeManager and worker is on this machine, so tables, outputs and
the provider's storage root are local folders for every policy alike (``file:`` URIs on YARN, whose default
file system is HDFS).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from bench.lib.provider import provider_command, run_command, start_cluster
from bench.lib.session import spark_submit, spark_submit_env
from bench.lib.yarn import printed_connection
from bench.month.policies import TENANT_NAME

TENANT_APP: Final = Path(__file__).resolve().parent / "tenant.py"
Kind = Literal["yarn", "standalone"]


@dataclass(frozen=True)
class Size:
    """The cluster's size: ``nodes`` NodeManagers (or workers) of ``cores`` and ``memory_mb`` each."""

    nodes: int = 2
    cores: int = 4
    memory_mb: int = 6144


@dataclass(frozen=True)
class Target:
    """A started cluster, as the DAGs and the measuring reach it."""

    kind: Kind
    folder: Path
    master: str
    """spark-submit's ``--master``."""
    connection_host: str
    connection_extra: dict[str, Any]
    """The provider's connection extras that fit the cluster."""
    submit_conf: dict[str, str] = field(default_factory=dict)
    """What a spark-submit on this cluster needs besides a policy's settings (YARN's jars, its AM's memory)."""
    env: dict[str, str] = field(default_factory=dict)
    """What Airflow's processes need in their environment (HADOOP_CONF_DIR for YARN)."""
    resourcemanager_url: str = ""

    def uri(self, path: Path) -> str:
        """``path`` as the cluster's drivers and executors name it."""
        return path.resolve().as_uri() if self.kind == "yarn" else str(path.resolve())

    def stop(self) -> None:
        command = "hadoop" if self.kind == "yarn" else "cluster"
        run_command(provider_command(command, "stop", "--dir", str(self.folder)), timeout_s=300)


def start_yarn(folder: Path, size: Size) -> Target:
    """``hadoop start``: HDFS and YARN on 127.0.0.1; the connection and addresses it printed."""
    sizes = ["--nodemanagers", str(size.nodes), "--vcores", str(size.cores), "--memory-mb", str(size.memory_mb)]
    out = run_command(provider_command("hadoop", "start", "--dir", str(folder), *sizes), timeout_s=600)
    return yarn_target(folder, out)


def yarn_target(folder: Path, out: str) -> Target:
    """The target ``hadoop start``'s output describes (its ``airflow connections add`` line)."""
    host, extra = printed_connection(out)
    return Target(
        kind="yarn",
        folder=folder,
        master="yarn",
        connection_host=host,
        connection_extra=extra,
        submit_conf=dict(extra.get("spark_conf") or {}),
        env={"HADOOP_CONF_DIR": str(extra["hadoop_conf_dir"])},
        resourcemanager_url=str(extra["yarn_resourcemanager_url"]),
    )


def start_standalone(folder: Path, size: Size) -> Target:
    """``cluster start``: a standalone master and ``size.nodes`` workers on 127.0.0.1."""
    cluster = start_cluster(folder, size.nodes, size.cores, f"{size.memory_mb}m")
    extra = {
        "master_webui_url": cluster.webui_url,
        "total_cores": size.nodes * size.cores,
        "total_memory": f"{size.nodes * size.memory_mb}m",
    }
    return Target("standalone", folder, cluster.master_url, cluster.master_url, extra)


def start_target(kind: Kind, folder: Path, size: Size) -> Target:
    folder.mkdir(parents=True, exist_ok=True)
    return start_yarn(folder, size) if kind == "yarn" else start_standalone(folder, size)


# ---------------------------------------------------------------- the other tenant


@dataclass(frozen=True)
class Tenant:
    """Another team's steady application: ``cores`` one-core executors, busy ``busy`` of the time.

    On YARN it runs in its own queue (``queue``; the loopback cluster's ``small`` queue holds a quarter of the
    cluster), as another team's work would, and its ApplicationMaster takes none of the month's queue's share
    for ApplicationMasters (half of a queue; a tenth, one application at a time, before 47095d0).
    """

    cores: int = 1
    busy: float = 0.5
    rows: int = 200_000_000
    """Rows each of its jobs hashes and sums (about a second per core here)."""
    queue: str = "small"


def tenant_command(target: Target, tenant: Tenant) -> list[str]:
    conf = {
        **target.submit_conf,
        "spark.dynamicAllocation.enabled": "false",
        "spark.executor.instances": str(tenant.cores),
        "spark.cores.max": str(tenant.cores),
        "spark.executor.cores": "1",
        "spark.executor.memory": "1g",
        "spark.pyspark.python": sys.executable,
        **({"spark.yarn.queue": tenant.queue} if target.kind == "yarn" else {}),
    }
    spec = json.dumps({"rows": tenant.rows, "partitions": tenant.cores, "busy": tenant.busy})
    return spark_submit(TENANT_APP, [spec], master=target.master, conf=conf, name=TENANT_NAME, driver_memory="512m")


def start_tenant(target: Target, tenant: Tenant, log: Path) -> subprocess.Popen[bytes] | None:
    """The tenant's spark-submit, in its own process group; None when it takes no cores."""
    if tenant.cores <= 0:
        return None
    env = spark_submit_env({**os.environ, **target.env})
    with log.open("ab") as out:
        return subprocess.Popen(
            tenant_command(target, tenant), stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )


def stop_leftovers(work: Path) -> list[int]:
    """End the processes still running from ``work`` after Airflow stopped (a BashOperator's spark-submit runs in
    a session of its own and outlives its task's process group): by process id, those whose command line names
    this month's work folder. Their ids."""
    import psutil

    marker = str(work.resolve())
    found = []
    for proc in psutil.process_iter(["pid", "cmdline"]):
        with contextlib.suppress(psutil.Error):
            if proc.pid != os.getpid() and any(marker in part for part in proc.info["cmdline"] or ()):
                found.append(proc)
    for proc in found:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    _, alive = psutil.wait_procs(found, timeout=20)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    return [p.pid for p in found]


def stop_tenant(process: subprocess.Popen[bytes] | None) -> None:
    """SIGTERM to the tenant's process group (its driver ends its application), SIGKILL after 30 s."""
    if process is None:
        return
    for sig, wait_s in ((signal.SIGTERM, 30), (signal.SIGKILL, 10)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            process.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue
