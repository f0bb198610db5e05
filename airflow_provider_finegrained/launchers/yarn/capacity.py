"""Free capacity of a YARN cluster, from the ResourceManager's REST API.

Per node (``/ws/v1/cluster/nodes``) when that answers, else the cluster metrics as one pseudo-worker; the
running applications it already counts; and for a queue, the Capacity Scheduler's headroom as a cap and what the
queue lets ApplicationMasters hold (:func:`parse_yarn_master_limit`).
"""

from __future__ import annotations

import getpass
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from airflow_provider_finegrained.capacity.sources import (
    CapacityUnavailable,
    ClusterCapacity,
    MiB,
    as_list,
    json_float,
    json_int,
)
from airflow_provider_finegrained.launchers.http import ACCEPT_JSON, HttpRequest, HttpRequestError, get_json, redact_url
from airflow_provider_finegrained.planning.capacity import MasterLimit, WorkerCapacity
from airflow_provider_finegrained.planning.units import format_bytes

DEFAULT_QUEUE = "default"
"""The queue Spark submits to when ``spark.yarn.queue`` is not set."""
YARN_GPU = "yarn.io/gpu"
"""YARN's resource type for GPUs (Hadoop 3.1+, ``yarn.resource-types``)."""


def yarn_requests(rm_url: str, queue: str | None = None) -> list[HttpRequest]:
    """The ResourceManager REST calls behind :func:`fetch_yarn_capacity`, in order.

    Nodes (per-node free resources), cluster metrics (aggregate fallback and totals), running applications
    (names the RM already counts) and, for a queue, the scheduler (the queue's share of the cluster).
    """
    base = rm_url.rstrip("/")
    requests = [
        HttpRequest("GET", f"{base}/ws/v1/cluster/nodes?states=RUNNING", headers=ACCEPT_JSON),
        HttpRequest("GET", f"{base}/ws/v1/cluster/metrics", headers=ACCEPT_JSON),
        HttpRequest("GET", f"{base}/ws/v1/cluster/apps?states=RUNNING", headers=ACCEPT_JSON),
    ]
    if queue:
        requests.append(HttpRequest("GET", f"{base}/ws/v1/cluster/scheduler", headers=ACCEPT_JSON))
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
    nodes = as_list(nodes_doc.get("node"))
    workers = []
    for node in nodes:
        if not isinstance(node, Mapping) or node.get("state", "RUNNING") != "RUNNING":
            continue  # The states=RUNNING filter already drops these; an RM that ignores it must not count them.
        free_cores = json_int(node, "availableVirtualCores", source)
        free_mib = json_int(node, "availMemoryMB", source)
        used_cores = json_int(node, "usedVirtualCores", source)
        used_mib = json_int(node, "usedMemoryMB", source)
        total = node.get("totalResource")  # Hadoop 3.3+; earlier: used + available.
        total_cores = json_int(total, "vCores", source) if isinstance(total, Mapping) else used_cores + free_cores
        total_mib = json_int(total, "memory", source) if isinstance(total, Mapping) else used_mib + free_mib
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
        free_cores=max(0, json_int(metrics, "availableVirtualCores", source)),
        free_memory=max(0, json_int(metrics, "availableMB", source)) * MiB,
        free_gpus=max(0.0, total_gpus - used_gpus),
        total_cores=json_int(metrics, "totalVirtualCores", source),
        total_memory=json_int(metrics, "totalMB", source) * MiB,
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
        for app in as_list(apps_doc.get("app"))
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
    returns None for another scheduler. The ApplicationMaster limit is :func:`parse_yarn_master_limit`'s; the
    user limit on containers (``userLimit``, ``userLimitFactor``) is not modelled.
    """
    info = _scheduler_info(scheduler)
    if info.get("type") != "capacityScheduler":
        return None
    found = _find_queue(info, queue)
    if found is None and queue == DEFAULT_QUEUE:
        return None  # no queue named: placement rules may send the application elsewhere
    if found is None:
        raise CapacityUnavailable(f"YARN queue {queue!r} is not in the Capacity Scheduler's queues")
    cluster = metrics.get("clusterMetrics")
    if not isinstance(cluster, Mapping):
        raise CapacityUnavailable("no 'clusterMetrics' object to scale the queue's share by")
    share = json_float(found, "absoluteMaxCapacity", f"queue {queue}") / 100
    used = found.get("resourcesUsed")
    used_cores = json_int(used, "vCores", f"queue {queue}") if isinstance(used, Mapping) else 0
    used_mib = json_int(used, "memory", f"queue {queue}") if isinstance(used, Mapping) else 0
    # floor: a share of 33.3% of 10 cores is 3 whole cores, not 3.33.
    cores = math.floor(share * json_int(cluster, "totalVirtualCores", "metrics") + 1e-9) - used_cores
    mib = math.floor(share * json_int(cluster, "totalMB", "metrics") + 1e-9) - used_mib
    return QueueHeadroom(queue, max(0, cores), max(0, mib) * MiB)


def parse_yarn_master_limit(scheduler: Mapping[str, Any], queue: str, user: str | None) -> MasterLimit | None:
    """What the leaf ``queue`` lets ApplicationMasters hold, from ``/ws/v1/cluster/scheduler`` (Capacity Scheduler).

    Modelled: the queue's limit (``AMResourceLimit``, its ``maximum-am-resource-percent`` share) less what its
    masters hold (``usedAMResource``), and one user's (``userAMResourceLimit``, the RM's figure for its first
    active user, less that user's ``AMResourceUsed`` in ``users``); memory only, as the scheduler's default
    resource calculator compares them. Regions granted moments ago hold their masters through the reservation
    ledger (``capacity.ledger.subtract``), against the queue's limit, not a user's. Not modelled: the cores of
    the limit (which the Dominant Resource Calculator compares too), user weights, node labels (the default
    partition's figures count). None for another scheduler, a queue not found, a parent queue, or an RM that
    does not report the limit (older releases).
    """
    info = _scheduler_info(scheduler)
    found = _find_queue(info, queue) if info.get("type") == "capacityScheduler" else None
    if found is None or not isinstance(found.get("AMResourceLimit"), Mapping):
        return None
    where = f"queue {queue}"
    used = found.get("usedAMResource")
    user_limit = found.get("userAMResourceLimit")
    users = found.get("users")
    mine = [
        entry
        for entry in (as_list(users.get("user")) if isinstance(users, Mapping) else [])
        if isinstance(entry, Mapping) and user is not None and entry.get("username") == user
    ]
    user_used = mine[0].get("AMResourceUsed") if mine else None
    return MasterLimit(
        queue=queue,
        limit=json_int(found["AMResourceLimit"], "memory", where) * MiB,
        used=json_int(used, "memory", where) * MiB if isinstance(used, Mapping) else 0,
        user=user,
        user_limit=json_int(user_limit, "memory", where) * MiB if isinstance(user_limit, Mapping) else None,
        user_used=json_int(user_used, "memory", where) * MiB if isinstance(user_used, Mapping) else 0,
    )


def submitting_user() -> str | None:
    """Who spark-submit runs as on a YARN cluster without Kerberos: ``HADOOP_USER_NAME``, else this login;
    None when this process's user has no name (then only the queue's limit is checked)."""
    try:
        return os.environ.get("HADOOP_USER_NAME") or getpass.getuser()
    except (OSError, KeyError):  # no passwd entry for this uid (OSError from Python 3.13, KeyError before)
        return None


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
    return replace(capacity, workers=tuple(workers), source=source)


MIN_ALLOCATION = "yarn.scheduler.minimum-allocation-mb"


def fetch_memory_step(rm_url: str, timeout_s: float = 5) -> int:
    """YARN's allocation unit in bytes: every container's memory is rounded up to a multiple of the scheduler's
    minimum allocation (the ResourceManager's ``/conf`` servlet); 0 when it does not say."""
    url = f"{rm_url.rstrip('/')}/conf?name={MIN_ALLOCATION}"
    try:
        answer = get_json(url, timeout_s, headers=ACCEPT_JSON)
        return int(answer["property"]["value"]) * MiB
    except (HttpRequestError, ValueError, KeyError, TypeError):
        return 0


def fetch_yarn_capacity(
    rm_url: str, timeout_s: float = 5, queue: str | None = None, user: str | None = None
) -> ClusterCapacity:
    """Free capacity from a YARN ResourceManager: per node when the nodes call answers, else cluster metrics.

    Running applications' names come along when that call answers (else none, which only makes a ledger
    more careful). With ``queue``, a Capacity Scheduler queue's headroom caps the result and its
    ApplicationMaster limit comes along, for ``user`` (default :func:`submitting_user`).
    """
    requests = yarn_requests(rm_url, queue)
    source = f"YARN ResourceManager {redact_url(rm_url.rstrip('/'))}"
    answers: list[Any] = []
    failures: list[str] = []
    for request in requests:
        try:
            answer = get_json(request.url, timeout_s, headers=request.headers)
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
        if (scheduler is None or metrics is None) and queue != DEFAULT_QUEUE:
            raise CapacityUnavailable(f"{source}: could not read queue {queue!r}: " + "; ".join(failures))
        headroom = (
            None if scheduler is None or metrics is None else parse_yarn_queue_headroom(scheduler, queue, metrics)
        )
        if headroom is None:
            kind = _scheduler_info(scheduler).get("type", "unknown") if scheduler is not None else "unread"
            why = "not found" if kind == "capacityScheduler" else f"{kind} scheduler"
            capacity = replace(capacity, source=f"{capacity.source} (queue {queue} not checked: {why})")
        else:
            capacity = limit_to_headroom(capacity, headroom)
        if scheduler is not None:
            limit = parse_yarn_master_limit(scheduler, queue, user or submitting_user())
            capacity = replace(capacity, master_limit=limit)
            if limit is None and headroom is not None:
                capacity = replace(capacity, source=f"{capacity.source} (its ApplicationMaster limit not reported)")
    return replace(capacity, memory_step=fetch_memory_step(rm_url, timeout_s))


def _scheduler_info(document: Mapping[str, Any]) -> Mapping[str, Any]:
    outer = document.get("scheduler")
    info = outer.get("schedulerInfo") if isinstance(outer, Mapping) else None
    return info if isinstance(info, Mapping) else {}


def _find_queue(queue_doc: Mapping[str, Any], name: str) -> Mapping[str, Any] | None:
    """Depth-first search by short name (``b1``) or full path (``root.b.b1``, Hadoop 3.2+ ``queuePath``)."""
    if queue_doc.get("queueName") == name or queue_doc.get("queuePath") == name:
        return queue_doc
    children = queue_doc.get("queues")
    for child in as_list(children.get("queue")) if isinstance(children, Mapping) else []:
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
    for info in as_list(infos.get("resourceInformation")):
        if isinstance(info, Mapping) and info.get("name") == name:
            return json_float(info, "value", name)
    return 0.0
