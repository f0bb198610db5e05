"""Kubernetes as spark-submit and the API server see it: the cluster submission of a region's driver, the exact
``spark-submit --status/--kill`` commands for its named driver pod, what ``--status`` prints, and the API
request for the driver's log (``GET /api/v1/namespaces/{ns}/pods/{pod}/log``).
"""

from __future__ import annotations

import hashlib
import re
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from airflow_provider_finegrained.launchers.base import LaunchState
from airflow_provider_finegrained.launchers.http import HttpRequest
from airflow_provider_finegrained.launchers.master import parse_master
from airflow_provider_finegrained.spark.submit import SubmitRequest, conf_arguments, spark_submit_path

DEFAULT_NAMESPACE = "default"
POD_PHASE_STATES: dict[str, LaunchState] = {
    "Pending": "pending",
    "Running": "running",
    "Succeeded": "succeeded",
    "Failed": "failed",
}
DRIVER_LOG_LINES = 200
COMMAND_TIMEOUT_S = 120.0
# The settings Spark's own Kubernetes client takes for the submitting side's credentials.
TOKEN_CONF = "spark.kubernetes.authenticate.submission.oauthToken"
TOKEN_FILE_CONF = "spark.kubernetes.authenticate.submission.oauthTokenFile"
CA_CONF = "spark.kubernetes.authenticate.submission.caCertFile"

K8S_POD_PHASES = ("Pending", "Running", "Succeeded", "Failed", "Unknown")
K8S_FINAL_PHASES = frozenset({"Succeeded", "Failed"})
_DNS_LABEL_RE = re.compile(r"[a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?")
# Spark's submission ids for Kubernetes are `[namespace:]pod`; a trailing `*` matches pod name prefixes.
_K8S_POD_PATTERN_RE = re.compile(r"[a-z0-9](?:[-a-z0-9.]*[a-z0-9])?\*?|[a-z0-9][-a-z0-9.]*\*")
_SCHEME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True)
class K8sDriverStatus:
    """One driver pod as ``spark-submit --status`` prints it."""

    pod_name: str
    namespace: str
    phase: str

    @property
    def done(self) -> bool:
        return self.phase in K8S_FINAL_PHASES


def _check_k8s_master(master: str) -> None:
    try:
        kind = parse_master(master).kind
    except ValueError:
        kind = None
    if kind != "k8s":
        raise ValueError(f"master: {master!r} is not a Kubernetes master; allowed: k8s://https://host:port")


def _check_namespace(namespace: str) -> None:
    if not _DNS_LABEL_RE.fullmatch(namespace):
        raise ValueError(
            f"namespace: {namespace!r} is not a Kubernetes namespace; allowed: lower-case letters, digits and "
            "'-', at most 63 characters, starting and ending with a letter or digit"
        )


def k8s_submission_id(namespace: str, driver_pod: str) -> str:
    """``namespace:driver-pod``, the submission id spark-submit takes; `driver_pod` may end in ``*``."""
    _check_namespace(namespace)
    if not _K8S_POD_PATTERN_RE.fullmatch(driver_pod) or len(driver_pod.rstrip("*")) > 253:
        raise ValueError(
            f"driver_pod: {driver_pod!r} is not a pod name or prefix pattern; allowed: a DNS-1123 name "
            "(lower-case letters, digits, '-', '.'), optionally ending in '*' to match every driver pod with "
            "that prefix"
        )
    return f"{namespace}:{driver_pod}"


def _check_driver_pod_name(namespace: str, driver_pod: str) -> None:
    """One driver pod's name in a valid namespace (not a ``*`` prefix pattern, which only status/kill take)."""
    k8s_submission_id(namespace, driver_pod)
    if driver_pod.endswith("*"):
        raise ValueError(f"driver_pod: {driver_pod!r} must be a pod name here, not a pattern")


def _k8s_operation(
    operation: str,
    master: str,
    namespace: str,
    driver_pod: str,
    spark_home: str | None,
    conf: Mapping[str, str],
    properties_file: str | None,
) -> list[str]:
    _check_k8s_master(master)
    command = [spark_submit_path(spark_home), "--master", master, *conf_arguments(conf, properties_file)]
    return [*command, operation, k8s_submission_id(namespace, driver_pod)]


def k8s_status_command(
    master: str,
    namespace: str,
    driver_pod: str,
    spark_home: str | None = None,
    conf: Mapping[str, str] | None = None,
    properties_file: str | None = None,
) -> list[str]:
    """``spark-submit --master k8s://… --status ns:pod``; `conf` may carry the client's credentials settings.

    Secret settings (an OAuth token) are not on the command: they must be in `properties_file`.
    """
    return _k8s_operation("--status", master, namespace, driver_pod, spark_home, conf or {}, properties_file)


def k8s_kill_command(
    master: str,
    namespace: str,
    driver_pod: str,
    spark_home: str | None = None,
    grace_period_s: int | None = None,
    conf: Mapping[str, str] | None = None,
    properties_file: str | None = None,
) -> list[str]:
    """``spark-submit --master k8s://… --kill ns:pod``: deletes the driver pod (its executors follow).

    Secret settings (an OAuth token) are not on the command: they must be in `properties_file`.
    """
    merged = dict(conf or {})
    if grace_period_s is not None:
        if grace_period_s < 0:
            raise ValueError(f"grace_period_s: {grace_period_s} must be >= 0 seconds")
        merged["spark.kubernetes.appKillPodDeletionGracePeriod"] = str(grace_period_s)
    return _k8s_operation("--kill", master, namespace, driver_pod, spark_home, merged, properties_file)


def parse_k8s_status_output(output: str) -> list[K8sDriverStatus]:
    """Parse what ``spark-submit --status`` prints: one entry per ``Application status (driver):`` block.

    Spark prints each field as ``\\n\\t <name>: <value>`` (``N/A`` when empty); nested container
    details are indented with two tabs and ignored here. No pod found gives an empty list.
    """
    statuses = []
    for block in output.split("Application status (driver):")[1:]:
        fields: dict[str, str] = {}
        for line in block.splitlines():
            match = re.match(r"^\t (pod name|namespace|phase): (.*)$", line)
            if match:
                fields.setdefault(match.group(1), match.group(2).strip())
        if "pod name" in fields:
            statuses.append(
                K8sDriverStatus(fields["pod name"], fields.get("namespace", "N/A"), fields.get("phase", "Unknown"))
            )
    return statuses


def k8s_cluster_submit_request(
    application: str,
    application_args: Sequence[str] = (),
    *,
    master: str,
    image: str,
    namespace: str,
    service_account: str,
    driver_pod: str,
    name: str | None = None,
    upload_path: str | None = None,
    py_files: Sequence[str] = (),
    conf: Mapping[str, str] | None = None,
    driver_memory: str | None = None,
    env: Mapping[str, str] | None = None,
) -> SubmitRequest:
    """A Kubernetes cluster-mode submission of a Python driver in pod `driver_pod`.

    The driver runs in a pod of `image` (which needs pyspark and this provider), so every file must be
    reachable from it: ``local:///path`` inside the image, a URL the pod can read (``s3a://``,
    ``https://``, ``hdfs://``), or a local file that spark-submit uploads to `upload_path`
    (``spark.kubernetes.file.upload.path``). Naming the driver pod makes ``--status``/``--kill`` exact.
    """
    _check_k8s_master(master)
    _check_namespace(namespace)
    _check_driver_pod_name(namespace, driver_pod)
    if not image:
        raise ValueError("image: spark.kubernetes.container.image is required for Kubernetes")
    if not service_account:
        raise ValueError("service_account: the driver needs a service account allowed to create executor pods")
    for setting, path in [("application", application), *(("py_files", p) for p in py_files)]:
        if not _SCHEME_RE.match(path) and upload_path is None:
            raise ValueError(
                f"{setting}: {path!r} is a path on this machine, which the driver pod cannot read; allowed: "
                "local:///path inside the image, a URL the pod can read (s3a://, https://, hdfs://), or set "
                "upload_path so spark-submit uploads it"
            )
    merged = {
        "spark.kubernetes.container.image": image,
        "spark.kubernetes.namespace": namespace,
        "spark.kubernetes.authenticate.driver.serviceAccountName": service_account,
        "spark.kubernetes.driver.pod.name": driver_pod,
        "spark.kubernetes.submission.waitAppCompletion": "true",
    }
    if upload_path is not None:
        merged["spark.kubernetes.file.upload.path"] = upload_path
    merged.update(conf or {})
    return SubmitRequest(
        application=application,
        master=master,
        deploy_mode="cluster",
        name=name,
        conf=merged,
        application_args=application_args,
        py_files=py_files,
        driver_memory=driver_memory,
        env=env or {},
    )


def driver_pod_name(app_name: str) -> str:
    """A DNS-1123 pod name derived from the application name: known before submitting, so kill is exact."""
    return f"fg-{hashlib.sha1(app_name.encode('utf-8')).hexdigest()[:16]}-driver"


def k8s_driver_log_request(
    api_url: str, namespace: str, driver_pod: str, tail_lines: int, token: str | None
) -> HttpRequest:
    """``GET {api}/api/v1/namespaces/{ns}/pods/{pod}/log?tailLines=N`` (plain text), with a bearer token if given."""
    _check_driver_pod_name(namespace, driver_pod)
    query = urllib.parse.urlencode({"tailLines": tail_lines})
    url = f"{api_url.rstrip('/')}/api/v1/namespaces/{namespace}/pods/{driver_pod}/log?{query}"
    headers = {"Accept": "text/plain"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return HttpRequest("GET", url, headers=headers)
