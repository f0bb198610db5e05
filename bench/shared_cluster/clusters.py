"""The cluster the K DAG runs share: the loopback standalone cluster or the loopback YARN (with HDFS).

One harness drives both; what differs is a :class:`Target`: how the cluster starts and stops, the provider
connection's host and cluster-specific settings, how the dynamic policy's plain ``spark-submit`` reaches it,
and where reserved core-seconds come from. On standalone they are the executors' lifetimes in Spark's
event logs (the master keeps no account); on YARN they are the ResourceManager's own account of each
application (``vcoreSeconds`` and ``memorySeconds`` of ``/ws/v1/cluster/apps``: every container it allocated,
the ApplicationMaster's included), not an estimate.

Both are started through the provider's command line (``cluster start``, ``hadoop start``), as a user does.
"""

from __future__ import annotations

import getpass
import json
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Protocol

from bench.lib.provider import CommandFailed, LocalCluster, provider_command, run_command, start_cluster
from bench.lib.yarn import apps_of, printed_connection, yarn_usage

CLUSTERS: Final = ("standalone", "yarn")
AM_CONTAINER_MB: Final = 1024
"""A client-mode ApplicationMaster's container: ``spark.yarn.am.memory`` 512 MiB + 384 MiB overhead, rounded up to
the loopback scheduler's 256 MiB steps."""
SMALL_QUEUE_PERCENT: Final = 50
"""The loopback YARN's second queue (``small``); the applications run in ``default``, the other half."""


@dataclass(frozen=True)
class Sizes:
    """What the standalone run's workers advertise; the YARN run's ``default`` queue gets the same."""

    workers: int
    cores_per_worker: int
    memory_per_worker: str
    """A Spark size: ``6g`` or ``6144m``."""

    @property
    def memory_mb_per_worker(self) -> int:
        number, unit = int(self.memory_per_worker[:-1]), self.memory_per_worker[-1].lower()
        if unit not in "gm":
            raise ValueError(f"memory per worker {self.memory_per_worker!r}: give it in g or m")
        return number * 1024 if unit == "g" else number

    @property
    def total_cores(self) -> int:
        return self.workers * self.cores_per_worker

    @property
    def total_memory(self) -> str:
        return f"{self.workers * self.memory_mb_per_worker}m"

    def describe(self) -> dict[str, Any]:
        """As the results file records them (the keys bench/simulate reads)."""
        return {"workers": self.workers, "cores_per_worker": self.cores_per_worker, "memory": self.memory_per_worker}

    def yarn_start_args(self) -> list[str]:
        """``hadoop start`` sizes whose ``default`` queue equals the standalone cluster's cores and memory.

        The loopback YARN caps ``default`` at ``100 - small`` percent of the NodeManagers (its maximum
        capacity); with ``small`` at 50% each NodeManager advertises twice a worker, so the queue the
        applications run in holds exactly the workers' total (an uneven share would lose a core to rounding).
        """
        scale = 100 // (100 - SMALL_QUEUE_PERCENT)
        return [
            *("--nodemanagers", str(self.workers), "--vcores", str(self.cores_per_worker * scale)),
            *("--memory-mb", str(self.memory_mb_per_worker * scale)),
            *("--small-queue-percent", str(SMALL_QUEUE_PERCENT)),
        ]


@dataclass(frozen=True)
class Submit:
    """How a plain ``spark-submit`` (the dynamic policy's tasks) reaches the cluster."""

    master: str
    conf: Mapping[str, str] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    """Variables set on the command line (``env K=V spark-submit ...``)."""

    def command(self, argv: list[str]) -> list[str]:
        return ["env", *(f"{k}={v}" for k, v in sorted(self.env.items())), *argv] if self.env else argv


class Target(Protocol):
    """A running cluster as the harness uses it."""

    @property
    def kind(self) -> str: ...

    @property
    def host(self) -> str:
        """The provider connection's host (its master)."""
        ...

    @property
    def sizes(self) -> Sizes: ...

    def connection_extra(self) -> dict[str, Any]:
        """The connection settings this cluster needs (``spark_conf`` merged with the harness's)."""
        ...

    def submit(self) -> Submit: ...

    def reserved(self, started: float, ended: float) -> dict[str, Any] | None:
        """The cluster manager's own account of what the applications started in the window reserved;
        None where it keeps none (then the event logs' executors are the figure)."""
        ...

    def describe(self) -> dict[str, Any]: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class StandaloneTarget:
    cluster: LocalCluster
    sizes: Sizes
    kind: str = "standalone"

    @property
    def host(self) -> str:
        return self.cluster.master_url

    def connection_extra(self) -> dict[str, Any]:
        return {"master_webui_url": self.cluster.webui_url}

    def submit(self) -> Submit:
        return Submit(self.cluster.master_url)

    def reserved(self, started: float, ended: float) -> dict[str, Any] | None:
        return None

    def describe(self) -> dict[str, Any]:
        return {"kind": self.kind, **self.sizes.describe()}

    def stop(self) -> None:
        self.cluster.stop()


@dataclass(frozen=True)
class YarnTarget:
    """The loopback YARN and HDFS of ``hadoop start --dir folder``; ``printed``: the connection extras it printed."""

    folder: Path
    sizes: Sizes
    printed: Mapping[str, Any]
    default_fs: str
    admission: Mapping[str, Any] = field(default_factory=dict)
    """The ``default`` queue's limit on ApplicationMasters when it started (:func:`queue_admission`)."""
    kind: str = "yarn"
    host: str = "yarn"

    @property
    def resourcemanager_url(self) -> str:
        return str(self.printed["yarn_resourcemanager_url"])

    def connection_extra(self) -> dict[str, Any]:
        """The printed connection but for its ``hdfs://`` storage root: the runs keep the local default root,
        as on standalone (every NodeManager is on this machine, so its containers read and write it)."""
        return {k: v for k, v in self.printed.items() if k not in ("storage_root", "total_cores", "total_memory")}

    def submit(self) -> Submit:
        """YARN in client mode with Spark's local jars; paths without a scheme stay local files (the tables and
        outputs are on this machine's disk, as on standalone); the staging folder on HDFS, as the provider's."""
        conf = {
            **self.printed["spark_conf"],
            "spark.hadoop.fs.defaultFS": "file:///",
            "spark.yarn.stagingDir": f"{self.default_fs.rstrip('/')}/user/{getpass.getuser()}",
        }
        return Submit("yarn", conf, {"HADOOP_CONF_DIR": str(self.printed["hadoop_conf_dir"])})

    def reserved(self, started: float, ended: float, wait_s: float = 120.0) -> dict[str, Any]:
        """YARN's account of the window's applications, once each has ended (or after ``wait_s``)."""
        url = f"{self.resourcemanager_url}/ws/v1/cluster/apps?startedTimeBegin={int(started * 1000)}"
        deadline = time.monotonic() + wait_s
        while True:
            with urllib.request.urlopen(url, timeout=30) as response:
                usage = yarn_usage(apps_of(json.loads(response.read())), started, ended)
            if not usage["unfinished"] or time.monotonic() > deadline:
                return usage
            time.sleep(2)

    def describe(self) -> dict[str, Any]:
        nodes = self.sizes.yarn_start_args()
        return {"kind": self.kind, **self.sizes.describe(), "hadoop_start": nodes, "queue": dict(self.admission)}

    def stop(self) -> None:
        run_command(provider_command("hadoop", "stop", "--dir", str(self.folder)), timeout_s=300)


def start_target(kind: str, folder: Path, sizes: Sizes) -> Target:
    """Start the loopback cluster of ``kind`` (one of :data:`CLUSTERS`) with its state in ``folder``."""
    if kind == "standalone":
        cluster = start_cluster(folder, sizes.workers, sizes.cores_per_worker, sizes.memory_per_worker)
        return StandaloneTarget(cluster, sizes)
    if kind != "yarn":
        raise ValueError(f"cluster {kind!r}: allowed: {', '.join(CLUSTERS)}")
    command = provider_command("hadoop", "start", "--dir", str(folder), *sizes.yarn_start_args(), "--timeout", "600")
    out = run_command(command, timeout_s=900)
    host, extra = printed_connection(out)
    state = json.loads((folder / "hadoop.json").read_text())
    if host != "yarn":
        raise CommandFailed(f"hadoop start printed a connection to {host!r}, not yarn")
    with urllib.request.urlopen(f"{extra['yarn_resourcemanager_url']}/ws/v1/cluster/scheduler", timeout=30) as answer:
        admission = queue_admission(json.loads(answer.read()))
    print(
        f"YARN's default queue: ApplicationMasters may hold {admission['am_limit_mb']} MiB and "
        f"{admission['am_limit_vcores']} vcores (maximum-am-resource-percent "
        f"{admission['max_am_resource_percent']}): {admission['am_slots']} application(s) at once, the rest "
        "wait ACCEPTED",
        flush=True,
    )
    return YarnTarget(folder, sizes, extra, str(state["default_fs"]), admission)


def queue_admission(answer: Mapping[str, Any], queue: str = "default") -> dict[str, Any]:
    """The Capacity Scheduler's limit on a queue's ApplicationMasters (``/ws/v1/cluster/scheduler``): YARN runs
    at most ``am_slots`` client-mode applications of the queue at once, whatever its free cores and memory."""
    queues = answer["scheduler"]["schedulerInfo"]["queues"]["queue"]
    found = next(q for q in queues if q.get("queueName") == queue)
    limit = found.get("AMResourceLimit") or {}
    mb, vcores = int(limit.get("memory", 0)), int(limit.get("vCores", 0))
    return {
        "queue": queue,
        "capacity_percent": found.get("absoluteCapacity"),
        "max_capacity_percent": found.get("absoluteMaxCapacity"),
        "am_limit_mb": mb,
        "am_limit_vcores": vcores,
        "max_am_resource_percent": found.get("configuredMaxAMResourceLimit"),
        # YARN always activates one application, even past the limit.
        "am_slots": max(1, min(mb // AM_CONTAINER_MB, vcores)),
    }
