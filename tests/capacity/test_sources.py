"""Capacity sources against real answers.

Standalone samples were captured from a real master + 2 workers of pip pyspark 4.3.0 on 127.0.0.1 (one worker
with 2 fake GPUs from a discovery script): idle, with an application holding 2 executors of 1 core, 512 MiB
and 1 GPU, with an application waiting for executors no worker can hold, and with one worker killed (DEAD).
YARN cannot run here: its samples follow the ResourceManager REST documentation and the RM's NodeInfo /
ClusterMetricsInfo classes (Hadoop 3.3+ adds the ``*Resource`` objects), served by a real local HTTP server.
``yarn_scheduler_am_limits.json`` follows CapacitySchedulerLeafQueueInfo and UserInfo (Hadoop 3.x: each leaf's
``AMResourceLimit``, ``usedAMResource``, ``userAMResourceLimit`` and ``users``) for 24 GiB, 16 vcores, a 512 MiB
minimum allocation and ``maximum-am-resource-percent`` 0.25; ``yarn_scheduler_capacity.json``'s leaves have the
older shape without them. The loopback ResourceManager's own answer is read in tests/hadoop.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psutil
import pytest

from airflow_provider_finegrained.capacity import (
    CapacityUnavailable,
    ClusterCapacity,
    declared_capacity,
    executor_request,
)
from airflow_provider_finegrained.launchers.http import HttpRequest
from airflow_provider_finegrained.launchers.standalone.capacity import (
    fetch_standalone_capacity,
    parse_standalone_status,
)
from airflow_provider_finegrained.launchers.yarn.capacity import (
    QueueHeadroom,
    fetch_yarn_capacity,
    parse_yarn_master_limit,
    parse_yarn_metrics,
    parse_yarn_nodes,
    parse_yarn_queue_headroom,
    parse_yarn_running_apps,
    yarn_requests,
)
from airflow_provider_finegrained.planning import CapacityOutcome, WorkerCapacity, decide_capacity
from airflow_provider_finegrained.planning.capacity import MasterLimit

SAMPLES = Path(__file__).parent / "samples"
MiB, GiB = 2**20, 2**30


def sample(name: str) -> dict[str, Any]:
    document = json.loads((SAMPLES / name).read_text())
    assert isinstance(document, dict)
    return document


def shape(capacity: ClusterCapacity) -> list[tuple[int, int, float, int | None, int | None, float | None]]:
    return [
        (w.free_cores, w.free_memory, w.free_gpus, w.total_cores, w.total_memory, w.total_gpus)
        for w in capacity.workers
    ]


# --- a real HTTP server that records what it is asked --------------------------------------------------------


class RecordingServer:
    """A loopback HTTP server answering fixed bodies per path (with query) and recording every request."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, bytes]] = {}
        self.requests: list[tuple[str, str, str | None]] = []
        self.headers: list[dict[str, str]] = []
        """Every request's headers, in the order of `requests`."""
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.requests.append(("GET", self.path, self.headers.get("Accept")))
                owner.headers.append(dict(self.headers))
                status, body = owner.routes.get(self.path, (404, b'{"error": "not found"}'))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:  # keep pytest output clean
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def serve(self, path: str, document: Any, status: int = 200) -> None:
        self.routes[path] = (status, document if isinstance(document, bytes) else json.dumps(document).encode())

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    running = RecordingServer()
    yield running
    running.close()


def closed_port_url() -> str:
    """A loopback URL nothing listens on: connections are refused at once."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/json/"


# --- standalone ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "workers", "active"),
    [
        # Worker 1: 1 core, 1024 MiB; worker 2: 2 cores, 2048 MiB, 2 GPUs. Nothing running.
        pytest.param(
            "standalone_idle.json",
            [(1, GiB, 0, 1, GiB, 0), (2, 2 * GiB, 2, 2, 2 * GiB, 2)],
            set(),
            id="idle",
        ),
        # 2 executors x (1 core, 512 MiB, 1 GPU) landed on worker 2 (the only one with GPUs): 0 cores, 1 GiB free.
        pytest.param(
            "standalone_running.json",
            [(1, GiB, 0, 1, GiB, 0), (0, GiB, 0, 2, 2 * GiB, 2)],
            {"capacity-sample-app"},
            id="app-running",
        ),
        # Registered, asks 4 GiB executors that fit nowhere: WAITING, granted nothing, so not counted as active.
        pytest.param(
            "standalone_waiting_app.json",
            [(1, GiB, 0, 1, GiB, 0), (2, 2 * GiB, 0, 2, 2 * GiB, 0)],
            set(),
            id="app-waiting",
        ),
        # The 1-core worker was killed: listed as DEAD, not counted.
        pytest.param("standalone_dead_worker.json", [(2, 2 * GiB, 0, 2, 2 * GiB, 0)], set(), id="dead-worker"),
    ],
)
def test_parse_real_standalone_status(
    name: str, workers: list[tuple[int, int, float, int, int, float]], active: set[str]
) -> None:
    capacity = parse_standalone_status(sample(name), f"standalone master {name}")
    assert shape(capacity) == workers
    assert capacity.active_apps == active
    assert capacity.total_free_cores == sum(w[0] for w in workers)
    assert capacity.total_free_memory == sum(w[1] for w in workers)


def test_standalone_sample_units_are_mib_and_gpu_addresses() -> None:
    """What the captured /json/ holds, so a change in Spark's format shows up here first."""
    running = sample("standalone_running.json")
    worker = running["workers"][1]
    assert (worker["cores"], worker["coresused"], worker["coresfree"]) == (2, 2, 0)
    # Memory in MiB; the master counts only executor memory (512 MiB each), not the 384 MiB overhead.
    assert (worker["memory"], worker["memoryused"], worker["memoryfree"]) == (2048, 1024, 1024)
    assert worker["resourcesfree"] == {"gpu": {"name": "gpu", "addresses": []}}
    (app,) = running["activeapps"]
    assert (app["name"], app["state"], app["cores"], app["memoryperexecutor"]) == (
        "capacity-sample-app",
        "RUNNING",
        2,
        512,
    )


def test_real_samples_drive_decisions() -> None:
    """2 executors of 1 core, 512 MiB + 384 MiB overhead and 1 GPU: worker 2 holds both when idle, none when busy."""
    request = executor_request(2, 1, 1, 512 * MiB, 384 * MiB, 0, 1, parallelism=4, min_parallelism=2)
    idle = parse_standalone_status(sample("standalone_idle.json"), "idle")
    busy = parse_standalone_status(sample("standalone_running.json"), "busy")
    assert decide_capacity(request, idle.workers).outcome is CapacityOutcome.AS_REQUESTED
    assert decide_capacity(request, busy.workers).outcome is CapacityOutcome.WAIT


@pytest.mark.parametrize("state", ["STANDBY", "RECOVERING", "COMPLETING_RECOVERY", None])
def test_master_not_alive_is_unavailable(state: str | None) -> None:
    status = {**sample("standalone_idle.json"), "status": state}
    with pytest.raises(CapacityUnavailable, match=rf"m1: master status is {state!r}, not 'ALIVE'"):
        parse_standalone_status(status, "m1")


def test_older_status_without_free_fields_derives_them() -> None:
    """Free = total - used when ``coresfree``/``memoryfree``/``resourcesfree`` are absent."""
    worker = {
        "state": "ALIVE",
        "cores": 8,
        "coresused": 3,
        "memory": 4096,
        "memoryused": 1536,
        "resources": {"gpu": {"name": "gpu", "addresses": ["0", "1", "2"]}},
        "resourcesused": {"gpu": {"name": "gpu", "addresses": ["1"]}},
    }
    capacity = parse_standalone_status({"status": "ALIVE", "workers": [worker]}, "old")
    assert shape(capacity) == [(5, 2560 * MiB, 2, 8, 4 * GiB, 3)]


@pytest.mark.parametrize(
    ("status", "message"),
    [
        pytest.param({"status": "ALIVE"}, "no 'workers' list", id="no-workers"),
        pytest.param(
            {"status": "ALIVE", "workers": [{"state": "ALIVE", "cores": "x"}]}, "'cores' is not a number", id="bad"
        ),
        pytest.param({"status": "ALIVE", "workers": [{"state": "ALIVE"}]}, "'cores' is missing", id="missing"),
    ],
)
def test_malformed_status_is_unavailable(status: dict[str, Any], message: str) -> None:
    with pytest.raises(CapacityUnavailable, match=message):
        parse_standalone_status(status, "m")


def test_fetch_tries_masters_in_order_first_alive_wins(server: RecordingServer) -> None:
    server.serve("/standby/json/", {**sample("standalone_idle.json"), "status": "STANDBY"})
    server.serve("/alive/json/", sample("standalone_running.json"))
    refused = closed_port_url()
    capacity = fetch_standalone_capacity([refused, f"{server.url}/standby/json/", f"{server.url}/alive/json/"], 2)
    assert capacity.source == f"standalone master {server.url}/alive/json/"
    assert capacity.active_apps == {"capacity-sample-app"}
    assert [r[1] for r in server.requests] == ["/standby/json/", "/alive/json/"]


def test_fetch_names_every_master_and_its_error(server: RecordingServer) -> None:
    server.serve("/standby/json/", {"status": "STANDBY", "workers": []})
    server.serve("/broken/json/", b"<html>not json</html>")
    server.serve("/error/json/", {"error": "boom"}, status=500)
    refused = closed_port_url()
    urls = [refused, f"{server.url}/standby/json/", f"{server.url}/broken/json/", f"{server.url}/error/json/"]
    with pytest.raises(CapacityUnavailable) as caught:
        fetch_standalone_capacity(urls, 2)
    message = str(caught.value)
    assert message.startswith("no standalone master answered as ALIVE: ")
    assert f"standalone master {refused}: GET {refused} failed: ConnectionError:" in message
    assert "Connection refused" in message
    assert f"standalone master {server.url}/standby/json/: master status is 'STANDBY'" in message
    assert f"standalone master {server.url}/broken/json/: GET {server.url}/broken/json/ answered no JSON" in message
    assert f"standalone master {server.url}/error/json/: GET {server.url}/error/json/ answered HTTP 500" in message


def test_fetch_hides_passwords_in_messages() -> None:
    port = closed_port_url().split(":")[2].split("/")[0]
    with pytest.raises(CapacityUnavailable) as caught:
        fetch_standalone_capacity([f"http://admin:s3cret@127.0.0.1:{port}/json/"], 1)
    assert "s3cret" not in str(caught.value)
    assert f"http://admin:***@127.0.0.1:{port}/json/" in str(caught.value)


def test_fetch_without_urls_is_unavailable() -> None:
    with pytest.raises(CapacityUnavailable, match="no standalone master /json/ URL"):
        fetch_standalone_capacity([])


# --- YARN ------------------------------------------------------------------------------------------------------

RM_NODES = "/ws/v1/cluster/nodes?states=RUNNING"
RM_METRICS = "/ws/v1/cluster/metrics"
RM_APPS = "/ws/v1/cluster/apps?states=RUNNING"
RM_SCHEDULER = "/ws/v1/cluster/scheduler"
# The ResourceManager's configuration servlet, as Hadoop 3 answers ``Accept: application/json``.
RM_MIN_ALLOCATION = "/conf?name=yarn.scheduler.minimum-allocation-mb"
MIN_ALLOCATION_ANSWER = {
    "property": {"key": "yarn.scheduler.minimum-allocation-mb", "value": "512", "isFinal": False, "resource": "x"}
}


def test_yarn_requests_are_exact() -> None:
    rm = "http://rm.example.com:8088/"
    accept = {"Accept": "application/json"}
    assert yarn_requests(rm) == [
        HttpRequest("GET", "http://rm.example.com:8088/ws/v1/cluster/nodes?states=RUNNING", headers=accept),
        HttpRequest("GET", "http://rm.example.com:8088/ws/v1/cluster/metrics", headers=accept),
        HttpRequest("GET", "http://rm.example.com:8088/ws/v1/cluster/apps?states=RUNNING", headers=accept),
    ]
    assert yarn_requests(rm, queue="etl")[3] == HttpRequest(
        "GET", "http://rm.example.com:8088/ws/v1/cluster/scheduler", headers=accept
    )


def test_parse_yarn_nodes() -> None:
    """nm1 (Hadoop 3.4): 6 of 8 vcores, 12 of 16 GiB and 1 of 2 GPUs free; nm2 (2.10, no resource objects):
    all 8 vcores and 8 GiB free, totals from used + available; nm3 is UNHEALTHY and left out."""
    capacity = parse_yarn_nodes(sample("yarn_nodes.json"), "rm")
    assert shape(capacity) == [(6, 12 * GiB, 1, 8, 16 * GiB, 2), (8, 8 * GiB, 0, 8, 8 * GiB, 0)]


@pytest.mark.parametrize(
    ("document", "workers"),
    [
        pytest.param({"nodes": None}, [], id="no-running-node"),
        pytest.param({"nodes": {}}, [], id="empty-object"),
        # One node collapsed to an object, numbers as strings (a YARN Router's rendering).
        pytest.param(
            {"nodes": {"node": {"state": "RUNNING", "availableVirtualCores": "4", "availMemoryMB": "2048",
                                "usedVirtualCores": "0", "usedMemoryMB": "0"}}},
            [(4, 2 * GiB, 0, 4, 2 * GiB, 0)],
            id="single-node-strings",
        ),
    ],
)  # fmt: skip
def test_parse_yarn_nodes_shapes(document: dict[str, Any], workers: list[tuple[Any, ...]]) -> None:
    assert shape(parse_yarn_nodes(document, "rm")) == workers


def test_parse_yarn_metrics_is_one_pseudo_worker() -> None:
    """availableVirtualCores 14, availableMB 20480 of 16 / 24576; GPUs 2 total, 1 used (cross-partition totals)."""
    capacity = parse_yarn_metrics(sample("yarn_metrics.json"), "rm")
    assert shape(capacity) == [(14, 20 * GiB, 1, 16, 24 * GiB, 2)]
    assert capacity.source == "rm (cluster total, not per node)"


def test_parse_yarn_metrics_before_resource_types_has_no_gpus() -> None:
    metrics = {k: v for k, v in sample("yarn_metrics.json")["clusterMetrics"].items() if "AcrossPartition" not in k}
    assert shape(parse_yarn_metrics({"clusterMetrics": metrics}, "rm")) == [(14, 20 * GiB, 0, 16, 24 * GiB, 0)]


@pytest.mark.parametrize(
    ("document", "names"),
    [
        # adhoc-notebook runs its ApplicationMaster alone (runningContainers 1): no executor claimed yet.
        pytest.param(sample("yarn_apps_running.json"), {"finegrained__tpch__run1__region_a"}, id="two"),
        pytest.param({"apps": None}, set(), id="none"),
        pytest.param({"apps": {"app": {"name": "solo", "state": "RUNNING"}}}, {"solo"}, id="collapsed-one"),
        pytest.param(
            {"apps": {"app": [{"name": "a", "runningContainers": 0}, {"name": "b", "runningContainers": "3"}]}},
            {"b"},  # the AM and two executors; "a" holds none
            id="container-counts",
        ),
        pytest.param({"apps": {"app": [{"name": "acc", "state": "ACCEPTED"}]}}, set(), id="ignores-filterless-rm"),
    ],
)
def test_parse_yarn_running_apps(document: dict[str, Any], names: set[str]) -> None:
    assert parse_yarn_running_apps(document) == names


@pytest.mark.parametrize(
    ("queue", "headroom"),
    [
        # 50% of 16 vcores / 24576 MB = 8 / 12288, minus 2 / 4096 used.
        pytest.param("etl", QueueHeadroom("etl", 6, 8 * GiB), id="nested-leaf"),
        pytest.param("root.prod.etl", QueueHeadroom("root.prod.etl", 6, 8 * GiB), id="by-path"),
        # 25% of the cluster, nothing used.
        pytest.param("adhoc", QueueHeadroom("adhoc", 4, 6 * GiB), id="top-leaf"),
        # A parent queue: 100% of the cluster minus its children's 2 / 4096.
        pytest.param("prod", QueueHeadroom("prod", 14, 20 * GiB), id="parent"),
    ],
)
def test_queue_headroom(queue: str, headroom: QueueHeadroom) -> None:
    assert (
        parse_yarn_queue_headroom(sample("yarn_scheduler_capacity.json"), queue, sample("yarn_metrics.json"))
        == headroom
    )


def test_queue_headroom_unknown_queue_and_other_scheduler() -> None:
    metrics = sample("yarn_metrics.json")
    with pytest.raises(CapacityUnavailable, match="YARN queue 'nope' is not in the Capacity Scheduler's queues"):
        parse_yarn_queue_headroom(sample("yarn_scheduler_capacity.json"), "nope", metrics)
    assert parse_yarn_queue_headroom(sample("yarn_scheduler_fair.json"), "etl", metrics) is None


@pytest.mark.parametrize(
    ("sample_name", "queue", "user", "limit"),
    [
        # 2 of the queue's 4.5 GiB held; one user may hold 2.5 GiB (userLimit 50 with two active users).
        pytest.param(
            "yarn_scheduler_am_limits.json",
            "default",
            "alice",
            MasterLimit("default", 4608 * MiB, 3072 * MiB, "alice", 2560 * MiB, 2048 * MiB),
            id="per-user",
        ),
        pytest.param(
            "yarn_scheduler_am_limits.json",
            "root.default",
            "carol",  # holds no ApplicationMaster: not among the queue's users
            MasterLimit("root.default", 4608 * MiB, 3072 * MiB, "carol", 2560 * MiB, 0),
            id="user-without-applications",
        ),
        pytest.param(
            "yarn_scheduler_am_limits.json",
            "small",
            None,
            MasterLimit("small", 1536 * MiB, 1024 * MiB, None, 1536 * MiB, 0),
            id="queue-half-held",
        ),
        pytest.param(
            "yarn_scheduler_am_limits.json",
            "idle",
            "alice",
            MasterLimit("idle", 1024 * MiB, 0, "alice", 1024 * MiB, 0),
            id="users-null",
        ),
        # An older ResourceManager's leaves do not report the limit; a parent queue has none of its own.
        pytest.param("yarn_scheduler_capacity.json", "etl", "alice", None, id="older-rm-without-the-fields"),
        pytest.param("yarn_scheduler_capacity.json", "prod", "alice", None, id="parent-queue"),
        pytest.param("yarn_scheduler_am_limits.json", "nightly", "alice", None, id="unknown-queue"),
        pytest.param("yarn_scheduler_fair.json", "etl", "alice", None, id="fair-scheduler"),
    ],
)
def test_parse_yarn_master_limit(sample_name: str, queue: str, user: str | None, limit: MasterLimit | None) -> None:
    assert parse_yarn_master_limit(sample(sample_name), queue, user) == limit


@pytest.mark.parametrize(
    ("queue", "user", "master", "refusal"),
    [
        # The queue would hold 3 + 1 of its 4.5 GiB, but alice's own masters 2 + 1 of her 2.5 GiB.
        ("default", "alice", 1024, "queue default: user alice's ApplicationMasters may hold 2.5 GiB, 2.0 GiB held"),
        ("default", "bob", 1024, None),  # 1 + 1 of 2.5 GiB
        ("default", "carol", 1536, None),  # the queue exactly full: 3 + 1.5 = 4.5 GiB still fits
        ("default", "carol", 2048, "queue default: ApplicationMasters may hold 4.5 GiB, 3.0 GiB held"),
        ("small", "etl", 1024, "queue small: ApplicationMasters may hold 1.5 GiB, 1.0 GiB held"),
        ("idle", "alice", 1536, None),  # no master in the queue: the scheduler starts one however big
    ],
)
def test_the_master_limit_refuses_a_master_that_does_not_fit(
    queue: str, user: str, master: int, refusal: str | None
) -> None:
    limit = parse_yarn_master_limit(sample("yarn_scheduler_am_limits.json"), queue, user)
    assert limit is not None
    said = limit.refusal(master * MiB)
    if refusal is None:
        assert said is None
    else:
        assert said is not None and said.startswith(refusal), said
        assert said.endswith(f"this region's needs {master * MiB / GiB:.1f} GiB")


def test_fetch_yarn_queue_reads_its_master_limit_for_the_submitting_user(
    server: RecordingServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    serve_rm(server, RM_SCHEDULER)
    server.serve(RM_SCHEDULER, sample("yarn_scheduler_am_limits.json"))
    monkeypatch.setenv("HADOOP_USER_NAME", "alice")  # spark-submit runs as her on a cluster without Kerberos
    capacity = fetch_yarn_capacity(server.url, timeout_s=2, queue="default")
    assert capacity.master_limit == MasterLimit("default", 4608 * MiB, 3072 * MiB, "alice", 2560 * MiB, 2048 * MiB)
    assert "queue default's ApplicationMasters hold 3.0 GiB of 4.5 GiB" in capacity.describe()
    assert fetch_yarn_capacity(server.url, timeout_s=2, queue="default", user="bob").master_limit == replace(
        capacity.master_limit, user="bob", user_used=1024 * MiB
    )
    # The older ResourceManager's queue (no limit reported) says so; no queue named, nothing is read.
    serve_rm(server)
    older = fetch_yarn_capacity(server.url, timeout_s=2, queue="etl")
    assert older.master_limit is None
    assert older.source.endswith("(its ApplicationMaster limit not reported)")
    assert fetch_yarn_capacity(server.url, timeout_s=2).master_limit is None


def serve_rm(server: RecordingServer, *skip: str) -> None:
    routes = {
        RM_NODES: "yarn_nodes.json",
        RM_METRICS: "yarn_metrics.json",
        RM_APPS: "yarn_apps_running.json",
        RM_SCHEDULER: "yarn_scheduler_capacity.json",
    }
    for path, name in routes.items():
        if path not in skip:
            server.serve(path, sample(name))
    if RM_MIN_ALLOCATION not in skip:
        server.serve(RM_MIN_ALLOCATION, MIN_ALLOCATION_ANSWER)


@contextlib.contextmanager
def rm_with_am_limits() -> Iterator[str]:
    """A ResourceManager whose scheduler reports ApplicationMaster limits (``yarn_scheduler_am_limits.json``)."""
    server = RecordingServer()
    try:
        serve_rm(server, RM_SCHEDULER)
        server.serve(RM_SCHEDULER, sample("yarn_scheduler_am_limits.json"))
        yield server.url
    finally:
        server.close()


def test_fetch_yarn_per_node_with_running_apps(server: RecordingServer) -> None:
    serve_rm(server)
    capacity = fetch_yarn_capacity(server.url + "/", timeout_s=2)
    assert shape(capacity) == [(6, 12 * GiB, 1, 8, 16 * GiB, 2), (8, 8 * GiB, 0, 8, 8 * GiB, 0)]
    assert capacity.active_apps == {"finegrained__tpch__run1__region_a"}  # adhoc-notebook: its AM alone
    assert capacity.source == f"YARN ResourceManager {server.url}"
    # Containers come in steps of the scheduler's minimum allocation: 512 MiB here.
    assert capacity.memory_step == 512 * 2**20
    assert server.requests == [
        ("GET", RM_NODES, "application/json"),
        ("GET", RM_METRICS, "application/json"),
        ("GET", RM_APPS, "application/json"),
        ("GET", RM_MIN_ALLOCATION, "application/json"),
    ]


def test_fetch_yarn_without_the_configuration_servlet_rounds_nothing(server: RecordingServer) -> None:
    serve_rm(server, RM_MIN_ALLOCATION)
    assert fetch_yarn_capacity(server.url, timeout_s=2).memory_step == 0


def test_fetch_yarn_falls_back_to_metrics_when_nodes_fail(server: RecordingServer) -> None:
    serve_rm(server, RM_NODES)  # 404 for the nodes call
    capacity = fetch_yarn_capacity(server.url, timeout_s=2)
    assert shape(capacity) == [(14, 20 * GiB, 1, 16, 24 * GiB, 2)]
    assert "cluster total, not per node" in capacity.describe()


def test_fetch_yarn_without_apps_counts_no_app_as_active(server: RecordingServer) -> None:
    serve_rm(server, RM_APPS)
    assert fetch_yarn_capacity(server.url, timeout_s=2).active_apps == frozenset()


def test_fetch_yarn_nothing_answers(server: RecordingServer) -> None:
    with pytest.raises(CapacityUnavailable) as caught:
        fetch_yarn_capacity(server.url, timeout_s=2)
    message = str(caught.value)
    assert message.startswith(f"YARN ResourceManager {server.url} did not answer: ")
    assert f"GET {server.url}{RM_NODES} answered HTTP 404" in message
    assert f"GET {server.url}{RM_METRICS} answered HTTP 404" in message


def test_fetch_yarn_queue_caps_nodes_in_order(server: RecordingServer) -> None:
    """Queue etl may take 6 vcores, 8 GiB more: nm1 (6, 12 GiB free) gets all of it, nm2 nothing."""
    serve_rm(server)
    capacity = fetch_yarn_capacity(server.url, timeout_s=2, queue="etl")
    assert shape(capacity) == [(6, 8 * GiB, 1, 8, 16 * GiB, 2), (0, 0, 0, 8, 8 * GiB, 0)]
    assert "within queue etl (6 core(s), 8.0 GiB headroom)" in capacity.source
    assert [r[1] for r in server.requests] == [RM_NODES, RM_METRICS, RM_APPS, RM_SCHEDULER, RM_MIN_ALLOCATION]


def test_the_implied_default_queue_is_checked_only_where_it_exists(server: RecordingServer) -> None:
    # Spark submits to "default" when spark.yarn.queue is unset; this scheduler has no such queue (placement
    # rules decide): the whole cluster counts and the source says so. A queue named on purpose must exist.
    serve_rm(server)
    capacity = fetch_yarn_capacity(server.url, timeout_s=2, queue="default")
    assert shape(capacity)[0][:2] == (6, 12 * GiB)
    assert capacity.source.endswith("(queue default not checked: not found)")
    with pytest.raises(CapacityUnavailable, match="YARN queue 'nightly' is not in the Capacity Scheduler's queues"):
        fetch_yarn_capacity(server.url, timeout_s=2, queue="nightly")


def test_fetch_yarn_queue_on_fair_scheduler_says_unchecked(server: RecordingServer) -> None:
    serve_rm(server, RM_SCHEDULER)
    server.serve(RM_SCHEDULER, sample("yarn_scheduler_fair.json"))
    capacity = fetch_yarn_capacity(server.url, timeout_s=2, queue="etl")
    assert shape(capacity)[0][:2] == (6, 12 * GiB)
    assert capacity.source.endswith("(queue etl not checked: fairScheduler scheduler)")


def test_fetch_yarn_queue_unreadable_is_unavailable(server: RecordingServer) -> None:
    serve_rm(server, RM_SCHEDULER)
    with pytest.raises(CapacityUnavailable, match=r"could not read queue 'etl'.*scheduler answered HTTP 404"):
        fetch_yarn_capacity(server.url, timeout_s=2, queue="etl")


# --- declared ---------------------------------------------------------------------------------------------------


def test_declared_capacity_is_one_free_pseudo_worker() -> None:
    capacity = declared_capacity(8, 16 * GiB, "connection spark_k8s (declared)", total_gpus=2)
    assert shape(capacity) == [(8, 16 * GiB, 2, 8, 16 * GiB, 2)]
    assert (
        capacity.describe() == "8 core(s), 16.0 GiB, 2 GPU(s) free on 1 worker(s), from connection spark_k8s (declared)"
    )
    with pytest.raises(ValueError, match="total_cores >= 1"):
        declared_capacity(0, GiB, "x")


def test_describe_names_roomiest_worker_and_running_apps() -> None:
    capacity = ClusterCapacity(
        (WorkerCapacity(1, GiB), WorkerCapacity(3, 2 * GiB)), "standalone master m", frozenset({"b", "a"})
    )
    assert capacity.describe() == (
        "4 core(s), 3.0 GiB free on 2 worker(s) (roomiest: 3 core(s), 2.0 GiB), from standalone master m; running: a, b"
    )


def test_capacity_package_imports_neither_airflow_nor_pyspark() -> None:
    code = (
        "import sys, airflow_provider_finegrained.capacity; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'airflow', 'pyspark'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# --- a real standalone master ----------------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _spark_home() -> str:
    import pyspark  # the tests may; the capacity package may not

    return os.path.dirname(pyspark.__file__)


@pytest.fixture
def standalone_master(tmp_path: Path) -> Iterator[str]:
    """A real master and one worker (2 cores, 1536 MiB) on loopback; yields the master's /json/ URL."""
    home = _spark_home()
    env = {
        **os.environ,
        "SPARK_HOME": home,
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOG_DIR": str(tmp_path / "logs"),
        "SPARK_PID_DIR": str(tmp_path),
        "SPARK_WORKER_DIR": str(tmp_path / "work"),
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
    }
    port, webui = _free_port(), _free_port()
    processes: list[subprocess.Popen[bytes]] = []

    def start(*args: str, log: str) -> None:
        # spark-class execs java: the pid we hold is the JVM's, so stopping it by pid stops the daemon.
        with open(tmp_path / f"{log}.log", "wb") as out:
            processes.append(
                subprocess.Popen([f"{home}/bin/spark-class", *args], env=env, stdout=out, stderr=subprocess.STDOUT)
            )

    start("org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
          "--webui-port", str(webui), log="master")  # fmt: skip
    url = f"http://127.0.0.1:{webui}/json/"
    try:
        _wait_for(url, lambda status: status.get("status") == "ALIVE", "master")
        start("org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "2", "--memory", "1536m",
              "--webui-port", str(_free_port()), f"spark://127.0.0.1:{port}", log="worker")  # fmt: skip
        _wait_for(url, lambda status: any(w.get("state") == "ALIVE" for w in status.get("workers", [])), "worker")
        yield url
    finally:
        for process in reversed(processes):
            process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)
        assert not any(psutil.pid_exists(p.pid) for p in processes)


def _wait_for(url: str, ready: Any, what: str, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if ready(json.load(response)):
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"the standalone {what} was not ready within {timeout_s} s ({url})")


@pytest.mark.slow
@pytest.mark.cluster
def test_fetch_from_a_real_master_after_dead_and_standby_ones(standalone_master: str, server: RecordingServer) -> None:
    server.serve("/json/", {**sample("standalone_idle.json"), "status": "STANDBY"})
    capacity = fetch_standalone_capacity([closed_port_url(), f"{server.url}/json/", standalone_master], timeout_s=5)
    assert shape(capacity) == [(2, 1536 * MiB, 0, 2, 1536 * MiB, 0)]
    assert capacity.source == f"standalone master {standalone_master}"
    # The live answer still has every field the captured samples (and the parser) rely on.
    with urllib.request.urlopen(standalone_master, timeout=5) as response:
        live = json.load(response)
    captured = sample("standalone_idle.json")
    assert set(captured) <= set(live)
    assert set(captured["workers"][0]) <= set(live["workers"][0])
