"""YARN and Kubernetes status/kill requests and cluster-mode submissions (exact requests, documented answers)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_finegrained.execution.region_setup import with_jvm_start
from airflow_provider_finegrained.launchers.http import HttpRequest, HttpRequestError, HttpResponse, send
from airflow_provider_finegrained.launchers.kubernetes.commands import (
    K8sDriverStatus,
    k8s_cluster_submit_request,
    k8s_kill_command,
    k8s_status_command,
    parse_k8s_status_output,
)
from airflow_provider_finegrained.launchers.yarn.applications import (
    kill_yarn_app,
    parse_yarn_app_status,
    parse_yarn_kill_answer,
    yarn_app_status,
    yarn_kill_request,
    yarn_status_request,
)
from airflow_provider_finegrained.launchers.yarn.launcher import yarn_cluster_submit_request
from airflow_provider_finegrained.planning import StageDemand, size_region
from airflow_provider_finegrained.settings import ConnectionSettings
from airflow_provider_finegrained.spark.jvm_start import archive_for_this_host
from airflow_provider_finegrained.spark.submit import build_spark_submit_command, spark_submit_command
from tests.decisions import sized_decision
from tests.loopback_http import JsonHandler, serving

APP_ID = "application_1326821518301_0005"
RM = "http://rm.example.com:8088"

# The Cluster Application API's JSON example (Hadoop's ResourceManagerRest.md).
FINISHED_APP = {
    "app": {
        "finishedTime": 1326824991300,
        "amContainerLogs": "http://host.domain.com:8042/node/containerlogs/container_1326821518301_0005_01_000001",
        "trackingUI": "History",
        "state": "FINISHED",
        "user": "user1",
        "id": APP_ID,
        "clusterId": 1326821518301,
        "finalStatus": "SUCCEEDED",
        "amHostHttpAddress": "host.domain.com:8042",
        "progress": 100,
        "name": "Sleep job",
        "applicationType": "Yarn",
        "startedTime": 1326824544552,
        "elapsedTime": 446748,
        "diagnostics": "",
        "trackingUrl": "http://host.domain.com:8088/proxy/application_1326821518301_0005/jobhistory/job/job_1326821518301_5_5",
        "queue": "a1",
        "memorySeconds": 151730,
        "vcoreSeconds": 103,
        "unmanagedApplication": "false",
        "applicationPriority": 0,
        "appNodeLabelExpression": "",
        "amNodeLabelExpression": "",
    }
}


def _app(**changes: object) -> dict[str, object]:
    return {"app": {**FINISHED_APP["app"], **changes}}


@pytest.fixture
def fake_home(tmp_path: Path) -> str:
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "spark-submit").write_text("#!/bin/sh\n")
    return str(tmp_path)


# -- YARN requests ---------------------------------------------------------------------------------


def test_yarn_status_request() -> None:
    assert yarn_status_request(RM + "/", APP_ID) == HttpRequest(
        "GET", f"{RM}/ws/v1/cluster/apps/{APP_ID}", headers={"Accept": "application/json"}
    )
    assert yarn_status_request(RM, APP_ID, user="etl").url == f"{RM}/ws/v1/cluster/apps/{APP_ID}?user.name=etl"


def test_yarn_kill_request() -> None:
    request = yarn_kill_request(RM, APP_ID)
    assert request == HttpRequest(
        "PUT",
        f"{RM}/ws/v1/cluster/apps/{APP_ID}/state",
        body='{"state": "KILLED"}',
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    assert request.body is not None and json.loads(request.body) == {"state": "KILLED"}


@pytest.mark.parametrize(
    ("rm_url", "app_id", "match"),
    [
        (RM, "app-20240101000000-0001", "app_id: 'app-20240101000000-0001' is not a YARN application id"),
        (RM, "application_1_2/../x", "not a YARN application id"),
        ("rm.example.com:8088", APP_ID, "rm_url: 'rm.example.com:8088' must be the ResourceManager web address"),
    ],
)
def test_yarn_requests_refuse_bad_ids_and_addresses(rm_url: str, app_id: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        yarn_status_request(rm_url, app_id)
    with pytest.raises(ValueError, match=match):
        yarn_kill_request(rm_url, app_id)


@pytest.mark.parametrize(
    ("changes", "done", "succeeded"),
    [
        ({}, True, True),
        # A driver that raised: YARN's state is FINISHED, only finalStatus says it failed.
        ({"finalStatus": "FAILED", "diagnostics": "User application exited with status 1"}, True, False),
        ({"state": "KILLED", "finalStatus": "KILLED"}, True, False),
        ({"state": "FAILED", "finalStatus": "FAILED"}, True, False),
        ({"state": "RUNNING", "finalStatus": "UNDEFINED", "progress": 10}, False, False),
        ({"state": "ACCEPTED", "finalStatus": "UNDEFINED"}, False, False),
    ],
)
def test_parse_yarn_app_status(changes: dict[str, object], done: bool, succeeded: bool) -> None:
    status = parse_yarn_app_status(json.dumps(_app(**changes)))
    assert status.app_id == APP_ID
    assert status.state == changes.get("state", "FINISHED")
    assert status.final_status == changes.get("finalStatus", "SUCCEEDED")
    assert status.diagnostics == changes.get("diagnostics", "")
    assert (status.done, status.succeeded) == (done, succeeded)


@pytest.mark.parametrize(
    ("payload", "match"),
    [
        ({"apps": None}, "not a YARN application answer"),
        ({"app": {"id": APP_ID}}, "not a YARN application answer"),
        (_app(state="SLEEPING"), "unknown YARN application state 'SLEEPING'"),
    ],
)
def test_parse_yarn_app_status_refuses_other_answers(payload: dict[str, object], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        parse_yarn_app_status(payload)


def test_parse_yarn_kill_answer() -> None:
    assert parse_yarn_kill_answer(HttpResponse(202, '{"state":"ACCEPTED"}')) == "ACCEPTED"
    assert parse_yarn_kill_answer(HttpResponse(200, '{"state":"KILLED"}')) == "KILLED"
    with pytest.raises(HttpRequestError, match="HTTP 403"):
        parse_yarn_kill_answer(HttpResponse(403, ""))


# -- YARN over real HTTP ---------------------------------------------------------------------------


@dataclass
class FakeResourceManager:
    """A real HTTP server on 127.0.0.1 answering like the RM and recording every request."""

    url: str
    requests: list[tuple[str, str, dict[str, str], str]] = field(default_factory=list)
    kill_calls: int = 0


@pytest.fixture
def resource_manager() -> Iterator[FakeResourceManager]:
    recorder = FakeResourceManager(url="")

    class Handler(JsonHandler):
        def _record(self) -> str:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            recorder.requests.append((self.command, self.path, dict(self.headers.items()), body))
            return body

        def do_GET(self) -> None:
            self._record()
            if self.path.split("?")[0] == f"/ws/v1/cluster/apps/{APP_ID}":
                self._answer(200, _app(state="RUNNING", finalStatus="UNDEFINED", progress=10))
            else:
                self._answer(404, {"RemoteException": {"exception": "NotFoundException", "message": "app not found"}})

        def do_PUT(self) -> None:
            body = self._record()
            if json.loads(body) != {"state": "KILLED"}:
                self._answer(400, {"RemoteException": {"message": "Only 'KILLED' is allowed as a target state."}})
                return
            recorder.kill_calls += 1
            # The documented sequence: 202 while the kill is under way, then 200 once it is done.
            if recorder.kill_calls == 1:
                self._answer(202, {"state": "RUNNING"}, {"Location": f"{recorder.url}/ws/v1/cluster/apps/{APP_ID}"})
            else:
                self._answer(200, {"state": "KILLED"})

        def log_message(self, format: str, *args: object) -> None:
            pass

    with serving(Handler) as recorder.url:
        yield recorder


def test_yarn_status_is_requested_over_http(resource_manager: FakeResourceManager) -> None:
    status = yarn_app_status(resource_manager.url, APP_ID, user="etl")
    assert (status.state, status.final_status, status.done) == ("RUNNING", "UNDEFINED", False)
    assert len(resource_manager.requests) == 1
    method, path, headers, body = resource_manager.requests[0]
    assert (method, path, body) == ("GET", f"/ws/v1/cluster/apps/{APP_ID}?user.name=etl", "")
    assert headers["Accept"] == "application/json"


def test_yarn_kill_is_sent_over_http_until_the_rm_reports_killed(resource_manager: FakeResourceManager) -> None:
    assert kill_yarn_app(resource_manager.url, APP_ID) == "RUNNING"
    assert kill_yarn_app(resource_manager.url, APP_ID) == "KILLED"
    assert [(m, p, json.loads(b)) for m, p, _h, b in resource_manager.requests] == [
        ("PUT", f"/ws/v1/cluster/apps/{APP_ID}/state", {"state": "KILLED"}),
        ("PUT", f"/ws/v1/cluster/apps/{APP_ID}/state", {"state": "KILLED"}),
    ]
    assert resource_manager.requests[0][2]["Content-Type"] == "application/json"


def test_yarn_errors_over_http(resource_manager: FakeResourceManager) -> None:
    with pytest.raises(HttpRequestError, match="HTTP 404"):
        yarn_app_status(resource_manager.url, "application_1_0001")
    answer = send(HttpRequest("GET", f"{resource_manager.url}/ws/v1/cluster/apps/application_1_0001"))
    assert answer.status == 404
    assert answer.json()["RemoteException"]["exception"] == "NotFoundException"
    with pytest.raises(HttpRequestError, match="failed"):
        # Nothing listens on port 9 of loopback (discard), so the connection is refused.
        yarn_app_status("http://127.0.0.1:9", APP_ID, timeout_s=5)


def test_yarn_cluster_submission(fake_home: str) -> None:
    request = yarn_cluster_submit_request(
        "/opt/jobs/driver.py",
        ["hdfs:///finegrained/jobs/r1.json"],
        name="dag.region",
        queue="etl",
        python_archive="hdfs:///envs/finegrained.tar.gz",
        py_files=["/opt/jobs/deps.zip"],
        conf={"spark.executor.cores": "4"},
        driver_memory="2g",
    )
    assert build_spark_submit_command(request, spark_home=fake_home) == [
        f"{fake_home}/bin/spark-submit",
        "--master",
        "yarn",
        "--deploy-mode",
        "cluster",
        "--name",
        "dag.region",
        "--conf",
        "spark.archives=hdfs:///envs/finegrained.tar.gz#environment",
        "--conf",
        "spark.executor.cores=4",
        "--conf",
        "spark.pyspark.python=./environment/bin/python",
        "--conf",
        "spark.yarn.maxAppAttempts=1",
        "--conf",
        "spark.yarn.queue=etl",
        "--conf",
        "spark.yarn.submit.waitAppCompletion=true",
        "--py-files",
        "/opt/jobs/deps.zip",
        "--driver-memory",
        "2g",
        "/opt/jobs/driver.py",
        "hdfs:///finegrained/jobs/r1.json",
    ]


@pytest.mark.security
def test_yarn_cluster_submission_keeps_secrets_in_the_properties_file(fake_home: str) -> None:
    request = yarn_cluster_submit_request(
        "/opt/jobs/driver.py",
        ["hdfs:///finegrained/jobs/r1.json"],
        conf={"spark.authenticate.secret": "yarn-s3cret", "spark.hadoop.fs.s3a.secret.key": "s3a-s3cret"},
    )
    with spark_submit_command(request, spark_home=fake_home) as command:
        path = command[command.index("--properties-file") + 1]
        assert Path(path).read_text() == (
            "spark.authenticate.secret=yarn-s3cret\nspark.hadoop.fs.s3a.secret.key=s3a-s3cret\n"
        )
        assert command == [
            f"{fake_home}/bin/spark-submit",
            "--master",
            "yarn",
            "--deploy-mode",
            "cluster",
            "--properties-file",
            path,
            "--load-spark-defaults",
            "--conf",
            "spark.yarn.maxAppAttempts=1",
            "--conf",
            "spark.yarn.submit.waitAppCompletion=true",
            "/opt/jobs/driver.py",
            "hdfs:///finegrained/jobs/r1.json",
        ]
    assert not os.path.exists(path)


# -- Kubernetes ------------------------------------------------------------------------------------

K8S = "k8s://https://k8s.example.com:6443"


def test_k8s_status_and_kill_commands(fake_home: str) -> None:
    assert k8s_status_command(K8S, "etl", "fg-dag-region-driver", spark_home=fake_home) == [
        f"{fake_home}/bin/spark-submit",
        "--master",
        K8S,
        "--status",
        "etl:fg-dag-region-driver",
    ]
    assert k8s_kill_command(K8S, "etl", "fg-dag-*", spark_home=fake_home, grace_period_s=30) == [
        f"{fake_home}/bin/spark-submit",
        "--master",
        K8S,
        "--conf",
        "spark.kubernetes.appKillPodDeletionGracePeriod=30",
        "--kill",
        "etl:fg-dag-*",
    ]
    assert k8s_status_command(K8S, "etl", "spark-pi*", spark_home=fake_home)[-1] == "etl:spark-pi*"


@pytest.mark.parametrize(
    ("master", "namespace", "pod", "match"),
    [
        ("yarn", "etl", "p", "master: 'yarn' is not a Kubernetes master"),
        (K8S, "ETL", "p", "namespace: 'ETL' is not a Kubernetes namespace"),
        (K8S, "etl", "Driver", "driver_pod: 'Driver' is not a pod name or prefix pattern"),
        (K8S, "etl", "a*b", "driver_pod: 'a\\*b'"),
        (K8S, "etl", "*", "driver_pod"),
    ],
)
def test_k8s_commands_refuse_bad_names(fake_home: str, master: str, namespace: str, pod: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        k8s_status_command(master, namespace, pod, spark_home=fake_home)
    with pytest.raises(ValueError, match=match):
        k8s_kill_command(master, namespace, pod, spark_home=fake_home)


# What `spark-submit --status` prints (K8SSparkSubmitOperation + KubernetesUtils.formatPodState).
STATUS_OUTPUT = """\
Submitting a request for the status of submission etl:fg-dag-* in k8s://https://k8s.example.com:6443.
Application status (driver): \n\t pod name: fg-dag-r1-driver
\t namespace: etl
\t labels: spark-app-selector -> spark-1a2b, spark-role -> driver
\t pod uid: 7c6f2d1e-0000-4000-8000-000000000001
\t creation time: 2024-05-01T10:00:00Z
\t service account name: spark
\t volumes: spark-local-dir-1, spark-conf-volume-driver, kube-api-access-abcde
\t node name: node-1
\t start time: 2024-05-01T10:00:01Z
\t phase: Running
\t container status: \n\t\t container name: spark-kubernetes-driver
\t\t container image: registry.example.com/finegrained:1.0
\t\t container state: running
\t\t container started at: 2024-05-01T10:00:05Z
Application status (driver): \n\t pod name: fg-dag-r2-driver
\t namespace: etl
\t labels: spark-app-selector -> spark-3c4d, spark-role -> driver
\t pod uid: 7c6f2d1e-0000-4000-8000-000000000002
\t creation time: 2024-05-01T09:00:00Z
\t service account name: spark
\t volumes: spark-local-dir-1
\t node name: node-2
\t start time: 2024-05-01T09:00:01Z
\t phase: Failed
\t container status: \n\t\t container name: spark-kubernetes-driver
\t\t container state: terminated
\t\t exit code: 1
"""


def test_parse_k8s_status_output() -> None:
    statuses = parse_k8s_status_output(STATUS_OUTPUT)
    assert statuses == [
        K8sDriverStatus("fg-dag-r1-driver", "etl", "Running"),
        K8sDriverStatus("fg-dag-r2-driver", "etl", "Failed"),
    ]
    assert [s.done for s in statuses] == [False, True]
    assert parse_k8s_status_output("Application not found.\n") == []
    assert parse_k8s_status_output("No applications found.\n") == []


def etl_driver_request(**extra: Any) -> Any:
    """The Kubernetes cluster-mode submission both tests below build: pod fg-dag-r1-driver in namespace etl."""
    return k8s_cluster_submit_request(
        "local:///opt/finegrained/driver.py",
        ["s3a://bucket/finegrained/jobs/r1.json"],
        master=K8S,
        image="registry.example.com/finegrained:1.0",
        namespace="etl",
        service_account="spark",
        driver_pod="fg-dag-r1-driver",
        **extra,
    )


def test_k8s_cluster_submission(fake_home: str) -> None:
    request = etl_driver_request(name="dag.region", driver_memory="2g")
    assert build_spark_submit_command(request, spark_home=fake_home) == [
        f"{fake_home}/bin/spark-submit",
        "--master",
        K8S,
        "--deploy-mode",
        "cluster",
        "--name",
        "dag.region",
        "--conf",
        "spark.kubernetes.authenticate.driver.serviceAccountName=spark",
        "--conf",
        "spark.kubernetes.container.image=registry.example.com/finegrained:1.0",
        "--conf",
        "spark.kubernetes.driver.pod.name=fg-dag-r1-driver",
        "--conf",
        "spark.kubernetes.namespace=etl",
        "--conf",
        "spark.kubernetes.submission.waitAppCompletion=true",
        "--driver-memory",
        "2g",
        "local:///opt/finegrained/driver.py",
        "s3a://bucket/finegrained/jobs/r1.json",
    ]
    # The pod named here is what --status and --kill address.
    assert k8s_kill_command(K8S, "etl", "fg-dag-r1-driver", spark_home=fake_home)[-1] == "etl:fg-dag-r1-driver"


def test_k8s_cluster_submission_gives_every_pod_the_archive_made_in_the_image(fake_home: str) -> None:
    # An archive made in the image (docs/cold-start.md) is named by its path there; both the driver pod and the
    # executor pods map it, and run the region's JIT. What this sends is what a Kubernetes cluster would get.
    extra = {"class_archive": "/opt/spark/spark.jsa", "jit": "c1", "total_cores": 4, "total_memory": "8g",
             "deploy_mode": "cluster"}  # fmt: skip
    conn = ConnectionSettings.from_connection_fields(K8S, extra, airflow_home="/srv/airflow")
    sizing = size_region([StageDemand("s", 4)], conn.cluster_profile())
    conf = with_jvm_start(conn, sized_decision(sizing, conn), {}, archive_for_this_host(conn.class_archive, None, None))
    command = build_spark_submit_command(etl_driver_request(conf=conf), spark_home=fake_home)
    flags = "-XX:SharedArchiveFile=/opt/spark/spark.jsa -Xshare:auto -Xlog:cds*=off -XX:TieredStopAtLevel=1"
    assert f"spark.driver.extraJavaOptions={flags}" in command
    assert f"spark.executor.extraJavaOptions={flags}" in command
    # With the default ("auto"), the archive made on the Airflow worker does not travel to the pods (a
    # client-mode driver, on the worker, maps it: tests/spark/test_jvm_start.py).
    auto = ConnectionSettings.from_connection_fields(K8S, {**extra, "class_archive": "auto"}, airflow_home="/a")
    conf = with_jvm_start(auto, sized_decision(sizing, auto), {}, Path("/worker/cache/spark-1.jsa"))
    assert conf == {key: "-XX:TieredStopAtLevel=1" for key in ("spark.driver.extraJavaOptions",
                                                                "spark.executor.extraJavaOptions")}  # fmt: skip


@pytest.mark.security
def test_k8s_commands_keep_the_oauth_token_in_the_properties_file(fake_home: str) -> None:
    request = etl_driver_request(conf={"spark.kubernetes.authenticate.submission.oauthToken": "k8s-t0ken"})
    with spark_submit_command(request, spark_home=fake_home) as command:
        path = command[command.index("--properties-file") + 1]
        assert Path(path).read_text() == "spark.kubernetes.authenticate.submission.oauthToken=k8s-t0ken\n"
        assert command[:8] == [
            f"{fake_home}/bin/spark-submit",
            "--master",
            K8S,
            "--deploy-mode",
            "cluster",
            "--properties-file",
            path,
            "--load-spark-defaults",
        ]
        assert "k8s-t0ken" not in " ".join(command)
    token = {"spark.kubernetes.authenticate.submission.oauthToken": "k8s-t0ken"}
    file = "/run/x/secret.properties"
    assert k8s_kill_command(K8S, "etl", "fg-dag-r1-driver", fake_home, 30, token, properties_file=file) == [
        f"{fake_home}/bin/spark-submit",
        "--master",
        K8S,
        "--properties-file",
        file,
        "--load-spark-defaults",
        "--conf",
        "spark.kubernetes.appKillPodDeletionGracePeriod=30",
        "--kill",
        "etl:fg-dag-r1-driver",
    ]
    assert k8s_status_command(K8S, "etl", "fg-dag-r1-driver", fake_home, token, properties_file=file) == [
        f"{fake_home}/bin/spark-submit",
        "--master",
        K8S,
        "--properties-file",
        file,
        "--load-spark-defaults",
        "--status",
        "etl:fg-dag-r1-driver",
    ]
    with pytest.raises(ValueError, match="never go on spark-submit's command line") as caught:
        k8s_status_command(K8S, "etl", "fg-dag-r1-driver", fake_home, token)
    assert "k8s-t0ken" not in str(caught.value)


def test_k8s_submission_needs_files_the_pod_can_read() -> None:
    common: dict[str, Any] = {
        "master": K8S,
        "image": "img",
        "namespace": "etl",
        "service_account": "spark",
        "driver_pod": "fg-driver",
    }
    with pytest.raises(ValueError, match=re.escape("application: '/opt/driver.py' is a path on this machine")):
        k8s_cluster_submit_request("/opt/driver.py", **common)
    with pytest.raises(ValueError, match=re.escape("py_files: 'deps.zip'")):
        k8s_cluster_submit_request("local:///driver.py", py_files=["deps.zip"], **common)
    uploaded = k8s_cluster_submit_request("/opt/driver.py", upload_path="s3a://bucket/upload", **common)
    assert uploaded.conf["spark.kubernetes.file.upload.path"] == "s3a://bucket/upload"
    with pytest.raises(ValueError, match="driver_pod: 'fg-\\*' must be a pod name"):
        k8s_cluster_submit_request("local:///d.py", **{**common, "driver_pod": "fg-*"})
    with pytest.raises(ValueError, match="image"):
        k8s_cluster_submit_request("local:///d.py", **{**common, "image": ""})


# -- YARN's ApplicationMaster container ----------------------------------------------------------------

MiB = 2**20


@pytest.mark.parametrize(
    ("deploy_mode", "conf", "expected"),
    [
        # Client mode: Spark's executor launcher, spark.yarn.am.* (1 core, 512 MiB + the 384 MiB minimum overhead).
        ("client", {}, (1, 896 * MiB)),
        ("client", {"spark.yarn.am.cores": "2", "spark.yarn.am.memory": "8g"}, (2, (8192 + 819) * MiB)),  # whole MiB
        ("client", {"spark.driver.memory": "4g"}, (1, 896 * MiB)),  # the driver is the task's child here
        # Cluster mode: the driver itself, spark.driver.* (default 1 GiB heap + 384 MiB).
        ("cluster", {}, (1, 1408 * MiB)),
        ("cluster", {"spark.driver.memory": "4g", "spark.driver.memoryOverhead": "1g"}, (1, 5 * 1024 * MiB)),
        ("cluster", {"spark.driver.cores": "2", "spark.yarn.am.memory": "8g"}, (2, 1408 * MiB)),
    ],
)
def test_the_application_master_is_sized_as_spark_sizes_it(
    deploy_mode: str, conf: dict[str, str], expected: tuple[int, int]
) -> None:
    from airflow_provider_finegrained.launchers.yarn.launcher import YarnLauncher
    from airflow_provider_finegrained.settings import ConnectionSettings

    fields: dict[str, Any] = {"deploy_mode": deploy_mode, "total_cores": 4, "total_memory": "8g"}
    settings = ConnectionSettings.from_connection_fields("yarn", fields, airflow_home="/srv/airflow")
    assert YarnLauncher(settings).master_container(conf) == expected
