"""Where a cluster's free capacity comes from: a standalone master, a YARN ResourceManager, or a declaration.

Each source becomes a :class:`ClusterCapacity`: per-worker free resources for ``decide_capacity``, plus the
names of applications the cluster already counts as using resources (so a ledger does not count them twice).
Neither Airflow nor Spark is imported; HTTP goes through the provider's one client (`launchers.http`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from airflow_provider_finegrained.launchers.http import HttpRequestError, get_json, redact_url
from airflow_provider_finegrained.planning.capacity import WorkerCapacity
from airflow_provider_finegrained.planning.units import format_bytes

MiB = 2**20
STANDALONE_GPU = "gpu"
"""Spark's name for GPUs in a standalone worker's ``resources`` (``spark.worker.resource.gpu.*``)."""
YARN_GPU = "yarn.io/gpu"
"""YARN's resource type for GPUs (Hadoop 3.1+, ``yarn.resource-types``)."""
ACCEPT_JSON = (("Accept", "application/json"),)


class CapacityUnavailable(Exception):
    """The cluster's free capacity could not be read (no master alive, no answer, or a malformed answer)."""


@dataclass(frozen=True)
class ClusterCapacity:
    """Free resources per worker, where they were read, and the applications already counted as using them."""

    workers: tuple[WorkerCapacity, ...]
    source: str
    """Human text naming where the numbers came from, e.g. ``standalone master http://host:8080/json/``."""
    active_apps: frozenset[str] = frozenset()
    """Names of applications whose executors the cluster already counts as used."""

    @property
    def total_free_cores(self) -> int:
        return sum(w.free_cores for w in self.workers)

    @property
    def total_free_memory(self) -> int:
        return sum(w.free_memory for w in self.workers)

    @property
    def total_free_gpus(self) -> float:
        return sum(w.free_gpus for w in self.workers)

    def describe(self) -> str:
        """One line for logs and task messages: totals free, the roomiest worker, the source."""
        gpus = f", {self.total_free_gpus:g} GPU(s)" if any(w.free_gpus or w.total_gpus for w in self.workers) else ""
        text = (
            f"{self.total_free_cores} core(s), {format_bytes(self.total_free_memory)}{gpus} free "
            f"on {len(self.workers)} worker(s)"
        )
        if len(self.workers) > 1:
            roomiest = max(self.workers, key=lambda w: (w.free_cores, w.free_memory))
            text += f" (roomiest: {roomiest.free_cores} core(s), {format_bytes(roomiest.free_memory)})"
        text += f", from {self.source}"
        if self.active_apps:
            text += f"; running: {', '.join(sorted(self.active_apps))}"
        return text


def declared_capacity(total_cores: int, total_memory: int, source: str, total_gpus: float = 0) -> ClusterCapacity:
    """One pseudo-worker holding a declared total, all free (local mode, Kubernetes: the connection says)."""
    if total_cores < 1 or total_memory < 1 or total_gpus < 0:
        raise ValueError(
            f"declared capacity needs total_cores >= 1, total_memory >= 1 and total_gpus >= 0, "
            f"got {total_cores}, {total_memory}, {total_gpus}"
        )
    worker = WorkerCapacity(total_cores, total_memory, total_gpus, total_cores, total_memory, total_gpus)
    return ClusterCapacity((worker,), source)


# --- Spark standalone -------------------------------------------------------------------------------------------


def parse_standalone_status(status: Mapping[str, Any], source: str) -> ClusterCapacity:
    """Read a standalone master's ``/json/`` answer: ALIVE workers (MiB -> bytes) and RUNNING applications.

    Raises :class:`CapacityUnavailable` unless the master's ``status`` is ``ALIVE`` (a standby or recovering
    master of an HA pair reports ``STANDBY`` or ``RECOVERING`` and knows no workers).
    """
    state = status.get("status")
    if state != "ALIVE":
        raise CapacityUnavailable(f"{source}: master status is {state!r}, not 'ALIVE'")
    workers_doc = status.get("workers")
    if not isinstance(workers_doc, list):
        raise CapacityUnavailable(f"{source}: no 'workers' list in the master's status")
    workers = []
    for doc in workers_doc:
        if not isinstance(doc, Mapping) or doc.get("state") != "ALIVE":
            continue  # DEAD, DECOMMISSIONED and UNKNOWN workers stay listed for a while but take no executors.
        cores = _int(doc, "cores", source)
        memory = _int(doc, "memory", source)
        free_cores = _int(doc, "coresfree", source) if "coresfree" in doc else cores - _int(doc, "coresused", source)
        free_mib = _int(doc, "memoryfree", source) if "memoryfree" in doc else memory - _int(doc, "memoryused", source)
        total_gpus = _standalone_gpus(doc.get("resources"))
        if "resourcesfree" in doc:
            free_gpus = _standalone_gpus(doc.get("resourcesfree"))
        else:
            free_gpus = total_gpus - _standalone_gpus(doc.get("resourcesused"))
        workers.append(
            WorkerCapacity(
                free_cores=max(0, free_cores),
                free_memory=max(0, free_mib) * MiB,
                free_gpus=max(0.0, free_gpus),
                total_cores=cores,
                total_memory=memory * MiB,
                total_gpus=total_gpus,
            )
        )
    # Only RUNNING applications hold executors the master counts; a WAITING one has been granted nothing yet.
    apps = status.get("activeapps") or []
    running = frozenset(
        str(a["name"]) for a in apps if isinstance(a, Mapping) and a.get("state") == "RUNNING" and "name" in a
    )
    return ClusterCapacity(tuple(workers), source, running)


def fetch_standalone_capacity(json_urls: Sequence[str], timeout_s: float = 5) -> ClusterCapacity:
    """Ask each master's ``/json/`` in turn (HA masters); the first ALIVE one answers for the cluster."""
    if not json_urls:
        raise CapacityUnavailable("no standalone master /json/ URL to ask")
    failures = []
    for url in json_urls:
        source = f"standalone master {redact_url(url)}"
        try:
            document = _get_json(HttpRequest("GET", url), timeout_s)
            if not isinstance(document, Mapping):
                raise CapacityUnavailable(f"{source}: the answer is not a JSON object")
            return parse_standalone_status(document, source)
        except CapacityUnavailable as exc:
            failures.append(str(exc))
        except HttpRequestError as exc:  # unreachable, an error status or no JSON; the message names the URL
            failures.append(f"{source}: {exc}")
    raise CapacityUnavailable("no standalone master answered as ALIVE: " + "; ".join(failures))


def _standalone_gpus(resources: Any) -> float:
    """GPU count in a worker's ``resources``-style map: ``{"gpu": {"name": "gpu", "addresses": [...]}}``."""
    if not isinstance(resources, Mapping):
        return 0.0
    gpu = resources.get(STANDALONE_GPU)
    if not isinstance(gpu, Mapping) or not isinstance(gpu.get("addresses"), list):
        return 0.0
    return float(len(gpu["addresses"]))


# --- YARN -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class HttpRequest:
    """One HTTP request, spelled out so tests can compare it with what a server received."""

    method: str
    url: str
    headers: tuple[tuple[str, str], ...] = ACCEPT_JSON


def yarn_requests(rm_url: str, queue: str | None = None) -> list[HttpRequest]:
    """The ResourceManager REST calls behind :func:`fetch_yarn_capacity`, in order.

    Nodes (per-node free resources), cluster metrics (aggregate fallback and totals), running applications
    (names the RM already counts) and, for a queue, the scheduler (the queue's share of the cluster).
    """
    base = rm_url.rstrip("/")
    requests = [
        HttpRequest("GET", f"{base}/ws/v1/cluster/nodes?states=RUNNING"),
        HttpRequest("GET", f"{base}/ws/v1/cluster/metrics"),
        HttpRequest("GET", f"{base}/ws/v1/cluster/apps?states=RUNNING"),
    ]
    if queue:
        requests.append(HttpRequest("GET", f"{base}/ws/v1/cluster/scheduler"))
    return requests


def parse_yarn_nodes(
    document: Mapping[str, Any], source: str, active_apps: frozenset[str] = frozenset()
) -> ClusterCapacity:
    """One worker per RUNNING node of ``/ws/v1/cluster/nodes`` (``availMemoryMB``, ``availableVirtualCores``...)."""
    nodes_doc = document.get("nodes")
    if nodes_doc is None:  # The RM answers {"nodes": null} when no node matches.
        return ClusterCapacity((), source, active_apps)
    if not isinstance(nodes_doc, Mapping):
        raise CapacityUnavailable(f"{source}: 'nodes' is not an object")
    nodes = _as_list(nodes_doc.get("node"))
    workers = []
    for node in nodes:
        if not isinstance(node, Mapping) or node.get("state", "RUNNING") != "RUNNING":
            continue  # The states=RUNNING filter already drops these; an RM that ignores it must not count them.
        free_cores = _int(node, "availableVirtualCores", source)
        free_mib = _int(node, "availMemoryMB", source)
        used_cores = _int(node, "usedVirtualCores", source)
        used_mib = _int(node, "usedMemoryMB", source)
        total = node.get("totalResource")  # Hadoop 3.3+; earlier: used + available.
        total_cores = _int(total, "vCores", source) if isinstance(total, Mapping) else used_cores + free_cores
        total_mib = _int(total, "memory", source) if isinstance(total, Mapping) else used_mib + free_mib
        free_gpus = _yarn_resource(node.get("availableResource"), YARN_GPU)
        if isinstance(total, Mapping):
            total_gpus = _yarn_resource(total, YARN_GPU)
        else:
            total_gpus = free_gpus + _yarn_resource(node.get("usedResource"), YARN_GPU)
        workers.append(
            WorkerCapacity(
                free_cores=max(0, free_cores),
                free_memory=max(0, free_mib) * MiB,
                free_gpus=free_gpus,
                total_cores=total_cores,
                total_memory=total_mib * MiB,
                total_gpus=total_gpus,
            )
        )
    return ClusterCapacity(tuple(workers), source, active_apps)


def parse_yarn_metrics(
    document: Mapping[str, Any], source: str, active_apps: frozenset[str] = frozenset()
) -> ClusterCapacity:
    """The cluster as one pseudo-worker from ``/ws/v1/cluster/metrics`` (``availableMB``, ``totalVirtualCores``...)."""
    metrics = document.get("clusterMetrics")
    if not isinstance(metrics, Mapping):
        raise CapacityUnavailable(f"{source}: no 'clusterMetrics' object")
    # GPUs only in the cross-partition totals (Hadoop 3.3+); before resource types YARN had no GPUs to schedule.
    total_gpus = _yarn_resource(metrics.get("totalClusterResourcesAcrossPartition"), YARN_GPU)
    used_gpus = _yarn_resource(metrics.get("totalUsedResourcesAcrossPartition"), YARN_GPU)
    worker = WorkerCapacity(
        free_cores=max(0, _int(metrics, "availableVirtualCores", source)),
        free_memory=max(0, _int(metrics, "availableMB", source)) * MiB,
        free_gpus=max(0.0, total_gpus - used_gpus),
        total_cores=_int(metrics, "totalVirtualCores", source),
        total_memory=_int(metrics, "totalMB", source) * MiB,
        total_gpus=total_gpus,
    )
    return ClusterCapacity((worker,), f"{source} (cluster total, not per node)", active_apps)


def parse_yarn_running_apps(document: Mapping[str, Any]) -> frozenset[str]:
    """Names of the applications in ``/ws/v1/cluster/apps?states=RUNNING`` that hold an executor.

    An application running only its ApplicationMaster (``runningContainers`` below 2) has not claimed its
    executors yet (a region asks for them at its first job), so a ledger keeps counting its reservation;
    the standalone master likewise reports such an application ``WAITING`` until its first executor.
    """
    apps_doc = document.get("apps")
    if not isinstance(apps_doc, Mapping):
        return frozenset()  # {"apps": null}: none running.
    return frozenset(
        str(app["name"])
        for app in _as_list(apps_doc.get("app"))
        if isinstance(app, Mapping)
        and "name" in app
        and app.get("state", "RUNNING") == "RUNNING"
        and _containers(app) >= 2
    )


def _containers(app: Mapping[str, Any]) -> int:
    """``runningContainers``; 2 when the ResourceManager does not say (then the application counts)."""
    try:
        return int(app["runningContainers"])
    except (KeyError, TypeError, ValueError):
        return 2


@dataclass(frozen=True)
class QueueHeadroom:
    """What a Capacity Scheduler queue may still take: its maximum share of the cluster minus what it uses."""

    queue: str
    cores: int
    memory: int


def parse_yarn_queue_headroom(
    scheduler: Mapping[str, Any], queue: str, metrics: Mapping[str, Any]
) -> QueueHeadroom | None:
    """Headroom of ``queue`` from ``/ws/v1/cluster/scheduler`` and ``/ws/v1/cluster/metrics``.

    Capacity Scheduler only (``absoluteMaxCapacity`` percent of the cluster totals, minus ``resourcesUsed``);
    returns None for another scheduler. User limits and AM shares are not modelled.
    """
    info = _scheduler_info(scheduler)
    if info.get("type") != "capacityScheduler":
        return None
    found = _find_queue(info, queue)
    if found is None:
        raise CapacityUnavailable(f"YARN queue {queue!r} is not in the Capacity Scheduler's queues")
    cluster = metrics.get("clusterMetrics")
    if not isinstance(cluster, Mapping):
        raise CapacityUnavailable("no 'clusterMetrics' object to scale the queue's share by")
    share = _float(found, "absoluteMaxCapacity", f"queue {queue}") / 100
    used = found.get("resourcesUsed")
    used_cores = _int(used, "vCores", f"queue {queue}") if isinstance(used, Mapping) else 0
    used_mib = _int(used, "memory", f"queue {queue}") if isinstance(used, Mapping) else 0
    # floor: a share of 33.3% of 10 cores is 3 whole cores, not 3.33.
    cores = math.floor(share * _int(cluster, "totalVirtualCores", "metrics") + 1e-9) - used_cores
    mib = math.floor(share * _int(cluster, "totalMB", "metrics") + 1e-9) - used_mib
    return QueueHeadroom(queue, max(0, cores), max(0, mib) * MiB)


def limit_to_headroom(capacity: ClusterCapacity, headroom: QueueHeadroom) -> ClusterCapacity:
    """Cap the workers' free resources so their sum stays within a queue's headroom (first workers first)."""
    cores, memory = headroom.cores, headroom.memory
    workers = []
    for w in capacity.workers:
        take_cores, take_memory = min(w.free_cores, cores), min(w.free_memory, memory)
        cores, memory = cores - take_cores, memory - take_memory
        workers.append(replace(w, free_cores=take_cores, free_memory=take_memory))
    source = (
        f"{capacity.source}, within queue {headroom.queue} "
        f"({headroom.cores} core(s), {format_bytes(headroom.memory)} headroom)"
    )
    return ClusterCapacity(tuple(workers), source, capacity.active_apps)


def fetch_yarn_capacity(rm_url: str, timeout_s: float = 5, queue: str | None = None) -> ClusterCapacity:
    """Free capacity from a YARN ResourceManager: per node when the nodes call answers, else cluster metrics.

    Running applications' names come along when that call answers (else none, which only makes a ledger
    more careful). With ``queue``, a Capacity Scheduler queue's headroom caps the result.
    """
    requests = yarn_requests(rm_url, queue)
    source = f"YARN ResourceManager {redact_url(rm_url.rstrip('/'))}"
    answers: list[Any] = []
    failures: list[str] = []
    for request in requests:
        try:
            answer = _get_json(request, timeout_s)
            if not isinstance(answer, Mapping):
                raise ValueError("the answer is not a JSON object")
            answers.append(answer)
        except HttpRequestError as exc:  # its message names the method and the URL, without a password
            answers.append(None)
            failures.append(str(exc))
        except ValueError as exc:
            answers.append(None)
            failures.append(f"{request.method} {redact_url(request.url)}: {exc}")
    nodes, metrics, apps = answers[0], answers[1], answers[2]
    active = parse_yarn_running_apps(apps) if apps is not None else frozenset()
    if nodes is not None:
        capacity = parse_yarn_nodes(nodes, source, active)
    elif metrics is not None:
        capacity = parse_yarn_metrics(metrics, source, active)
    else:
        raise CapacityUnavailable(f"{source} did not answer: " + "; ".join(failures))
    if queue:
        scheduler = answers[3]
        if scheduler is None or metrics is None:
            raise CapacityUnavailable(f"{source}: could not read queue {queue!r}: " + "; ".join(failures))
        headroom = parse_yarn_queue_headroom(scheduler, queue, metrics)
        if headroom is None:
            kind = _scheduler_info(scheduler).get("type", "unknown")
            capacity = replace(capacity, source=f"{capacity.source} (queue {queue} not checked: {kind} scheduler)")
        else:
            capacity = limit_to_headroom(capacity, headroom)
    return capacity


def _scheduler_info(document: Mapping[str, Any]) -> Mapping[str, Any]:
    outer = document.get("scheduler")
    info = outer.get("schedulerInfo") if isinstance(outer, Mapping) else None
    return info if isinstance(info, Mapping) else {}


def _find_queue(queue_doc: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    """Depth-first search by short name (``b1``) or full path (``root.b.b1``, Hadoop 3.2+ ``queuePath``)."""
    if queue_doc.get("queueName") == name or queue_doc.get("queuePath") == name:
        return queue_doc
    children = queue_doc.get("queues")
    for child in _as_list(children.get("queue")) if isinstance(children, Mapping) else []:
        if isinstance(child, Mapping) and (found := _find_queue(child, name)) is not None:
            return found
    return None


def _yarn_resource(resource: Any, name: str) -> float:
    """A named resource's ``value`` in a YARN resource object (``resourceInformations.resourceInformation``)."""
    if not isinstance(resource, Mapping):
        return 0.0
    infos = resource.get("resourceInformations")
    if not isinstance(infos, Mapping):
        return 0.0
    for info in _as_list(infos.get("resourceInformation")):
        if isinstance(info, Mapping) and info.get("name") == name:
            return _float(info, "value", name)
    return 0.0


# --- shared helpers ---------------------------------------------------------------------------------------------


def _get_json(request: HttpRequest, timeout_s: float) -> Any:
    return get_json(request.url, timeout_s, headers=dict(request.headers))


def _as_list(value: Any) -> list[Any]:
    """JSON lists as they are; a lone object as a list of one (some JAXB JSON writers collapse one-item lists)."""
    if isinstance(value, list):
        return value
    return [] if value is None else [value]


def _float(doc: Mapping[str, Any], key: str, where: str) -> float:
    value = doc.get(key)
    # Some RM front ends (the YARN Router) write numbers as strings.
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise CapacityUnavailable(f"{where}: {key!r} is missing or not a number: {value!r}")
    try:
        number = float(value)
    except ValueError:
        raise CapacityUnavailable(f"{where}: {key!r} is not a number: {value!r}") from None
    if not math.isfinite(number):
        raise CapacityUnavailable(f"{where}: {key!r} is not finite: {value!r}")
    return number


def _int(doc: Any, key: str, where: str) -> int:
    if not isinstance(doc, Mapping):
        raise CapacityUnavailable(f"{where}: expected an object holding {key!r}, got {doc!r}")
    return int(_float(doc, key, where))
