"""Free capacity of a standalone cluster, from its master's ``/json/`` (HA masters asked in turn)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from airflow_provider_finegrained.capacity.sources import CapacityUnavailable, ClusterCapacity, MiB, json_int
from airflow_provider_finegrained.launchers.http import HttpRequestError, get_json, redact_url
from airflow_provider_finegrained.planning.capacity import WorkerCapacity

STANDALONE_GPU = "gpu"
"""Spark's name for GPUs in a standalone worker's ``resources`` (``spark.worker.resource.gpu.*``)."""
DEFAULT_WEBUI_PORT = 8080
"""The port of a standalone master's web UI unless it was told otherwise (``spark.master.ui.port``); the
connection's ``webui_json_urls`` assume it on each master's host when ``master_webui_url`` is not set."""


def webui_text(settings: Any) -> str:
    """Where a standalone master's capacity is read, for messages: ``the master's web UI at http://host:8080``,
    and when the URL was derived rather than set ``(port 8080 assumed: set master_webui_url)``."""
    urls = [redact_url(url).removesuffix("/").removesuffix("/json") for url in settings.webui_json_urls()]
    where = f"the master's web UI at {urls[0]}" if len(urls) == 1 else f"the masters' web UIs at {', '.join(urls)}"
    if settings.master_webui_url:
        return where
    return f"{where} (port {DEFAULT_WEBUI_PORT} assumed: set master_webui_url)"


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
        cores = json_int(doc, "cores", source)
        memory = json_int(doc, "memory", source)
        free_cores = (
            json_int(doc, "coresfree", source) if "coresfree" in doc else cores - json_int(doc, "coresused", source)
        )
        free_mib = (
            json_int(doc, "memoryfree", source) if "memoryfree" in doc else memory - json_int(doc, "memoryused", source)
        )
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
            document = get_json(url, timeout_s)
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
