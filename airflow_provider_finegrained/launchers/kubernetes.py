"""Kubernetes: spark-submit in client or cluster mode, the driver pod named up front, status and kill with
``spark-submit --status/--kill``, the driver's log from the Kubernetes API.

Kubernetes does not run here: the commands are exact (tests check the argument lists) and the driver log
is read with the API's documented request (``GET /api/v1/namespaces/{ns}/pods/{pod}/log``), tested against
a local server speaking that shape. In cluster mode the driver pod needs an image with pyspark and this
provider (``spark.kubernetes.container.image``), a service account allowed to create executor pods, and
the driver program uploaded (``spark.kubernetes.file.upload.path``) or inside the image.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import subprocess
import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from airflow_provider_finegrained.launchers.base import (
    CapacityKind,
    LaunchHandle,
    LaunchSpec,
    LaunchState,
    LaunchStatus,
)
from airflow_provider_finegrained.launchers.http import HttpRequest, HttpRequestError, send
from airflow_provider_finegrained.launchers.master import MasterKind, parse_master
from airflow_provider_finegrained.launchers.submitting import SparkSubmitLauncher, driver_program
from airflow_provider_finegrained.spark.process import SparkSubmitProcess
from airflow_provider_finegrained.spark.properties_file import secret_properties_file, split_secret_conf
from airflow_provider_finegrained.spark.submit import SubmitRequest, conf_arguments, spark_submit_path

if TYPE_CHECKING:
    from airflow_provider_finegrained.settings.cluster import ClusterSettings

DEFAULT_NAMESPACE = "default"
_POD_PHASE_STATES: dict[str, LaunchState] = {
    "Pending": "pending",
    "Running": "running",
    "Succeeded": "succeeded",
    "Failed": "failed",
}
DRIVER_LOG_LINES = 200
COMMAND_TIMEOUT_S = 120.0
# The settings Spark's own Kubernetes client takes for the submitting side's credentials.
_TOKEN_CONF = "spark.kubernetes.authenticate.submission.oauthToken"
_TOKEN_FILE_CONF = "spark.kubernetes.authenticate.submission.oauthTokenFile"
_CA_CONF = "spark.kubernetes.authenticate.submission.caCertFile"

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


class KubernetesLauncher(SparkSubmitLauncher):
    """spark-submit to a Kubernetes API server; capacity as the connection declares it."""

    name = "kubernetes"
    kinds: frozenset[MasterKind] = frozenset({"k8s"})
    capacity_kind: CapacityKind = "declared"
    count_overhead = True

    @property
    def namespace(self) -> str:
        return str(self.settings.spark_conf.get("spark.kubernetes.namespace", DEFAULT_NAMESPACE))

    def driver_pod(self, app_name: str) -> str:
        configured = self.settings.spark_conf.get("spark.kubernetes.driver.pod.name")
        return str(configured) if configured else driver_pod_name(app_name)

    def application_conf(self, app_name: str) -> dict[str, str]:
        if self.settings.deploy_mode != "cluster":
            return {}  # in client mode the pod name would name the pod the driver runs in: there is none
        return {
            "spark.kubernetes.driver.pod.name": self.driver_pod(app_name),
            "spark.kubernetes.submission.waitAppCompletion": "true",
        }

    def submission_id(self, spec: LaunchSpec) -> str | None:
        if self.settings.deploy_mode != "cluster":
            return None
        return k8s_submission_id(self.namespace, self.driver_pod(spec.app_name))

    def request(self, spec: LaunchSpec) -> SubmitRequest:
        if self.settings.deploy_mode != "cluster":
            return super().request(spec)
        conf = dict(spec.conf)
        return k8s_cluster_submit_request(
            driver_program(),
            [spec.job_path],
            master=self.settings.master,
            image=conf.get("spark.kubernetes.container.image", ""),
            namespace=self.namespace,
            service_account=conf.get("spark.kubernetes.authenticate.driver.serviceAccountName", ""),
            driver_pod=self.driver_pod(spec.app_name),
            name=spec.app_name,
            upload_path=conf.get("spark.kubernetes.file.upload.path"),
            conf=conf,
            env=self.env(spec),
        )

    def _client_conf(self) -> dict[str, str]:
        """The submitting side's credentials settings, passed on to ``--status``/``--kill``."""
        return {
            k: str(v)
            for k, v in self.settings.spark_conf.items()
            if k.startswith("spark.kubernetes.authenticate.submission.") or k == "spark.kubernetes.context"
        }

    def _client_secret_file(self) -> contextlib.AbstractContextManager[str | None]:
        """The client's secret settings (an OAuth token) in a private properties file, for ``--status``/``--kill``."""
        return secret_properties_file(split_secret_conf(self._client_conf())[1])

    def status_command(self, handle: LaunchHandle, properties_file: str | None = None) -> list[str]:
        pod = self._pod(handle)
        return k8s_status_command(
            self.settings.master,
            self.namespace,
            pod,
            self.settings.spark_home,
            self._client_conf(),
            properties_file=properties_file,
        )

    def kill_command(self, handle: LaunchHandle, properties_file: str | None = None) -> list[str]:
        pod = self._pod(handle)
        return k8s_kill_command(
            self.settings.master,
            self.namespace,
            pod,
            self.settings.spark_home,
            conf=self._client_conf(),
            properties_file=properties_file,
        )

    def _pod(self, handle: LaunchHandle) -> str:
        if not handle.submission_id:
            raise ValueError(f"application {handle.app_name!r} runs in client mode: it has no driver pod")
        return handle.submission_id.split(":", 1)[1]

    def status(self, handle: LaunchHandle) -> LaunchStatus:
        if not handle.submission_id:
            return super().status(handle)
        with self._client_secret_file() as path:
            done = subprocess.run(
                self.status_command(handle, path),
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
                check=False,
            )
        found = parse_k8s_status_output(done.stdout + done.stderr)
        if not found:
            return LaunchStatus("unknown", None, handle.submission_id, "no driver pod found")
        phase = found[0].phase
        state = _POD_PHASE_STATES.get(phase, "unknown")
        return LaunchStatus(state, None, handle.submission_id, f"driver pod phase {phase}")

    def kill_remote(self, handle: LaunchHandle | None, process: SparkSubmitProcess) -> str:
        if handle is None or not handle.submission_id:
            return "spark-submit and its driver were stopped"
        return self.delete_driver_pod(handle)

    def delete_driver_pod(self, handle: LaunchHandle) -> str:
        """``spark-submit --kill`` of the handle's driver pod, its submission credentials in a private file."""
        with self._client_secret_file() as path:
            subprocess.run(self.kill_command(handle, path), check=False, timeout=COMMAND_TIMEOUT_S, capture_output=True)
        return f"asked Kubernetes to delete driver pod {handle.submission_id}"

    def driver_log(self, handle: LaunchHandle) -> str | None:
        """The last lines of the driver pod's log, from the Kubernetes API (cluster mode)."""
        if not handle.submission_id:
            return None
        api_url = parse_master(self.settings.master).k8s_api_url or ""
        token = self._token()
        request = k8s_driver_log_request(api_url, self.namespace, self._pod(handle), DRIVER_LOG_LINES, token)
        response = send(request)
        if response.status != 200:
            # The answer may quote the request; it never holds the token, which travels in a header.
            raise HttpRequestError(f"driver pod log: GET {request.url} answered HTTP {response.status}")
        return f"driver pod {handle.submission_id} log (last {DRIVER_LOG_LINES} lines):\n{response.body}"

    def _token(self) -> str | None:
        conf = self.settings.spark_conf
        if conf.get(_TOKEN_CONF):
            return str(conf[_TOKEN_CONF])
        if conf.get(_TOKEN_FILE_CONF):
            with open(str(conf[_TOKEN_FILE_CONF]), encoding="utf-8") as handle:
                return handle.read().strip()
        return None


def follow_status(settings: ClusterSettings, handle: LaunchHandle) -> LaunchStatus:
    """The driver pod's phase, from ``spark-submit --status`` (``launchers.remote``)."""
    return KubernetesLauncher(settings).status(handle)


def kill_followed(settings: ClusterSettings, handle: LaunchHandle) -> str:
    """Delete the driver pod with ``spark-submit --kill`` (``launchers.remote``), as the launcher that submitted
    it would: submission credentials such as an OAuth token in a private properties file, never in argv."""
    return KubernetesLauncher(settings).delete_driver_pod(handle)
