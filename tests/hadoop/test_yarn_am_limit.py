"""A queue whose ApplicationMasters hold all YARN lets them: the next region waits instead of sitting ACCEPTED.

The session's ``default`` queue has 6 GiB and 3 vcores, of which ApplicationMasters may hold half
(``maximum-am-resource-percent`` 0.5 in LoopbackHadoop.java): 3 GiB. Another tenant's application, submitted
through the ResourceManager's REST API with a 2.5 GiB ApplicationMaster that only sleeps, leaves room for
cores and memory (2 vcores, 3.5 GiB) but not for a Spark client-mode ApplicationMaster of 896 MiB (1 GiB in
the cluster's 256 MiB steps): YARN would keep the region's application ACCEPTED with its cores free.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from airflow_provider_finegrained.capacity import application_master
from airflow_provider_finegrained.execution.capacity_gate import CapacitySource, CapacityWait, acquire
from airflow_provider_finegrained.launchers.http import HttpRequest, HttpRequestError, get_json, send
from airflow_provider_finegrained.launchers.yarn.applications import kill_yarn_app
from airflow_provider_finegrained.planning.capacity import (
    CapacityOutcome,
    ExecutorRequest,
    decide_capacity,
)
from airflow_provider_finegrained.spark.hadoop_cluster import HadoopCluster
from tests.hadoop.test_yarn import applications, connection
from tests.hadoop.test_yarn_capacity import run_wide

pytestmark = [pytest.mark.slow, pytest.mark.hadoop]

MiB, GiB = 2**20, 2**30
TENANT_AM_MB = 2560
JSON = {"Content-Type": "application/json", "Accept": "application/json"}


def post(url: str, body: dict[str, Any] | None = None) -> Any:
    answer = send(HttpRequest("POST", url, None if body is None else json.dumps(body), JSON), 10.0)
    assert 200 <= answer.status < 300, (answer.status, answer.body[:500])
    return json.loads(answer.body) if answer.body.strip() else None


def default_queue(rm: str) -> dict[str, Any]:
    info = get_json(f"{rm}/ws/v1/cluster/scheduler", 10.0)["scheduler"]["schedulerInfo"]
    queues = info["queues"]["queue"]
    return next(q for q in (queues if isinstance(queues, list) else [queues]) if q["queueName"] == "default")


def used_am_mb(rm: str) -> int:
    used = default_queue(rm).get("usedAMResource") or {}
    return int(used.get("memory", 0))


@pytest.fixture
def tenant_holding_the_am_limit(hadoop_cluster: HadoopCluster) -> Iterator[str]:
    """Another tenant's application in ``default`` whose ApplicationMaster (a ``sleep``, killed afterwards) holds
    2.5 GiB."""
    rm = hadoop_cluster.resourcemanager_url
    deadline = time.monotonic() + 30
    while used_am_mb(rm):  # an earlier test's application may still be finishing
        assert time.monotonic() < deadline, default_queue(rm)
        time.sleep(0.5)
    app_id = post(f"{rm}/ws/v1/cluster/apps/new-application")["application-id"]
    try:
        post(
            f"{rm}/ws/v1/cluster/apps",
            {
                "application-id": app_id,
                "application-name": "tenant.holds_the_am_limit",
                "queue": "default",
                "am-container-spec": {"commands": {"command": "sleep 600"}},
                "resource": {"memory": TENANT_AM_MB, "vCores": 1},
                "application-type": "YARN",
                "max-app-attempts": 1,
                "unmanaged-AM": False,
                "keep-containers-across-application-attempts": False,
            },
        )
        deadline = time.monotonic() + 30
        while used_am_mb(rm) < TENANT_AM_MB:  # counted once the scheduler activates the application
            assert time.monotonic() < deadline, default_queue(rm)
            time.sleep(0.5)
        yield app_id
    finally:
        with contextlib.suppress(HttpRequestError, ValueError):  # not submitted: nothing to kill, the error stands
            kill_yarn_app(rm, app_id)
        deadline = time.monotonic() + 30
        while used_am_mb(rm) and time.monotonic() < deadline:  # leave the queue as the next test expects it
            time.sleep(0.5)


def test_a_region_waits_while_the_queue_application_masters_hold_their_limit(
    hadoop_cluster: HadoopCluster,
    airflow_db: None,
    tenant_holding_the_am_limit: str,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    rm = hadoop_cluster.resourcemanager_url
    source = CapacitySource("yarn", (rm,), queue="default")
    capacity = source.read()
    limit = capacity.master_limit
    assert limit is not None, capacity.source
    assert (limit.queue, limit.limit, limit.used) == ("default", 3 * GiB, TENANT_AM_MB * MiB), limit
    # A region of one executor (1 core, 1 GiB + 384 MiB) and Spark's client-mode ApplicationMaster.
    master_cores, master_memory = application_master({}, cluster_mode=False)
    request = ExecutorRequest(
        executors=1, cores=1, memory=1408 * MiB, parallelism=1, master_cores=master_cores, master_memory=master_memory
    )
    sized = request.in_containers_of(capacity.memory_step)
    assert sized.master_memory == GiB  # 896 MiB in 256 MiB steps
    # Cores and memory are free for it: only the ApplicationMaster limit holds it back.
    assert decide_capacity(sized, capacity.workers).outcome is CapacityOutcome.AS_REQUESTED
    with pytest.raises(CapacityWait) as waited:
        acquire(source, request, "am-limit/region", "am_limit.region")
    reason = "queue default: ApplicationMasters may hold 3.0 GiB, 2.5 GiB held, this region's needs 1.0 GiB"
    assert f"no room for the region's ApplicationMaster: {reason}" in waited.value.message
    # cluster_queue leaves the waiting to YARN, as before.
    queued = acquire(source, request, "am-limit/region", "am_limit.region", cluster_queue=True)
    assert queued.decision.outcome is CapacityOutcome.QUEUED

    # A DAG's region: the reason reaches the task's log, and nothing is submitted to sit ACCEPTED.
    monkeypatch.setenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", connection(hadoop_cluster, capacity_wait_timeout=0))
    run = run_wide("yarn_am_limit")
    assert run.state == "failed"
    out = "".join(capfd.readouterr())
    assert reason in out, out[-3000:]
    assert applications(hadoop_cluster, "yarn_am_limit") == []
