"""Status and kill requests for cluster-mode drivers on YARN and Kubernetes, and their submissions.

Neither cluster manager runs here, so this module builds exact requests and commands and parses the
answers documented by Hadoop (ResourceManager REST API) and Spark (``spark-submit --status/--kill``).
HTTP goes through ``launchers.http``, the provider's one client.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from airflow_provider_finegrained.launchers.http import HttpRequest, HttpRequestError, HttpResponse, get_json, send
from airflow_provider_finegrained.spark.submit import SubmitRequest, spark_submit_path

__all__ = ["HttpRequest", "HttpRequestError", "HttpResponse", "get_json", "send"]  # re-exported for now

# -- YARN ------------------------------------------------------------------------------------------

YARN_APP_STATES = ("NEW", "NEW_SAVING", "SUBMITTED", "ACCEPTED", "RUNNING", "FINISHED", "FAILED", "KILLED")
YARN_FINAL_STATES = frozenset({"FINISHED", "FAILED", "KILLED"})
YARN_FINAL_STATUSES = ("UNDEFINED", "SUCCEEDED", "FAILED", "KILLED")
_YARN_APP_ID_RE = re.compile(r"application_\d+_\d+")


@dataclass(frozen=True)
class YarnAppStatus:
    """What the ResourceManager reports about one application (``GET /ws/v1/cluster/apps/{id}``)."""

    app_id: str
    state: str
    final_status: str
    diagnostics: str = ""
    tracking_url: str | None = None

    @property
    def done(self) -> bool:
        return self.state in YARN_FINAL_STATES

    @property
    def succeeded(self) -> bool:
        # A Spark driver that raised still ends in state FINISHED; only finalStatus tells failure apart.
        return self.state == "FINISHED" and self.final_status == "SUCCEEDED"


def _yarn_app_url(rm_url: str, app_id: str) -> str:
    if not _YARN_APP_ID_RE.fullmatch(app_id):
        raise ValueError(f"app_id: {app_id!r} is not a YARN application id; allowed: application_<cluster ts>_<n>")
    scheme = urllib.parse.urlsplit(rm_url).scheme
    if scheme not in ("http", "https"):
        raise ValueError(f"rm_url: {rm_url!r} must be the ResourceManager web address, http:// or https://")
    return f"{rm_url.rstrip('/')}/ws/v1/cluster/apps/{app_id}"


def _with_user(url: str, user: str | None) -> str:
    # Without Kerberos, the RM's pseudo authentication takes the caller from `user.name`.
    return url if user is None else f"{url}?{urllib.parse.urlencode({'user.name': user})}"


def yarn_status_request(rm_url: str, app_id: str, user: str | None = None) -> HttpRequest:
    """``GET {rm}/ws/v1/cluster/apps/{app_id}`` asking for JSON."""
    return HttpRequest("GET", _with_user(_yarn_app_url(rm_url, app_id), user), headers={"Accept": "application/json"})


def yarn_kill_request(rm_url: str, app_id: str, user: str | None = None) -> HttpRequest:
    """``PUT {rm}/ws/v1/cluster/apps/{app_id}/state`` with ``{"state": "KILLED"}``.

    The RM answers 202 Accepted (with the current state) while the kill is in progress and 200 with
    ``{"state": "KILLED"}`` once it is done; repeat the request, or poll the status, until then.
    """
    return HttpRequest(
        "PUT",
        _with_user(_yarn_app_url(rm_url, app_id) + "/state", user),
        body=json.dumps({"state": "KILLED"}),
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )


def parse_yarn_app_status(payload: str | Mapping[str, Any]) -> YarnAppStatus:
    """Parse the ``{"app": {...}}`` answer of the Cluster Application API."""
    data = json.loads(payload) if isinstance(payload, str) else payload
    app = data.get("app") if isinstance(data, Mapping) else None
    if not isinstance(app, Mapping) or "id" not in app or "state" not in app:
        raise ValueError(f"not a YARN application answer (expected {{'app': {{'id', 'state', ...}}}}): {data!r:.300}")
    state = str(app["state"])
    if state not in YARN_APP_STATES:
        raise ValueError(f"unknown YARN application state {state!r}; known: {', '.join(YARN_APP_STATES)}")
    return YarnAppStatus(
        app_id=str(app["id"]),
        state=state,
        final_status=str(app.get("finalStatus", "UNDEFINED")),
        diagnostics=str(app.get("diagnostics") or ""),
        tracking_url=app.get("trackingUrl") or None,
    )


def parse_yarn_kill_answer(response: HttpResponse) -> str:
    """The application state in an answer to `yarn_kill_request` (``KILLED`` once the kill is done)."""
    if response.status not in (200, 202):
        raise HttpRequestError(f"YARN refused the kill (HTTP {response.status}): {response.body[:300]}")
    return str(response.json()["state"])


def yarn_app_status(rm_url: str, app_id: str, user: str | None = None, timeout_s: float = 10.0) -> YarnAppStatus:
    """Ask the ResourceManager for an application's state."""
    response = send(yarn_status_request(rm_url, app_id, user), timeout_s)
    if response.status != 200:
        raise HttpRequestError(f"YARN status of {app_id} answered HTTP {response.status}: {response.body[:300]}")
    return parse_yarn_app_status(response.body)


def kill_yarn_app(rm_url: str, app_id: str, user: str | None = None, timeout_s: float = 10.0) -> str:
    """Send the kill request once; return the state the RM reports (``KILLED`` when already done)."""
    return parse_yarn_kill_answer(send(yarn_kill_request(rm_url, app_id, user), timeout_s))


def yarn_cluster_submit_request(
    application: str,
    application_args: Sequence[str] = (),
    *,
    name: str | None = None,
    queue: str | None = None,
    python_archive: str | None = None,
    py_files: Sequence[str] = (),
    conf: Mapping[str, str] | None = None,
    driver_memory: str | None = None,
    env: Mapping[str, str] | None = None,
) -> SubmitRequest:
    """A YARN cluster-mode submission of a Python driver.

    spark-submit uploads local files (the application, `py_files`) to the staging directory, so local
    paths work. The nodes need a Python with pyspark and this provider: `python_archive` (a packed
    virtual environment, e.g. ``hdfs:///envs/finegrained.tar.gz``) is unpacked as ``./environment``
    in every container and used as ``spark.pyspark.python``. Paths inside `application_args` are
    passed as they are and must be readable from the cluster (use the shared storage root).
    """
    merged: dict[str, str] = {
        # A failed driver must fail the Airflow task; a second YARN attempt would rerun it silently.
        "spark.yarn.maxAppAttempts": "1",
        "spark.yarn.submit.waitAppCompletion": "true",
    }
    if queue:
        merged["spark.yarn.queue"] = queue
    if python_archive:
        merged["spark.archives"] = f"{python_archive}#environment"
        merged["spark.pyspark.python"] = "./environment/bin/python"
    merged.update(conf or {})
    return SubmitRequest(
        application=application,
        master="yarn",
        deploy_mode="cluster",
        name=name,
        conf=merged,
        application_args=application_args,
        py_files=py_files,
        driver_memory=driver_memory,
        env=env or {},
    )


# -- Kubernetes ------------------------------------------------------------------------------------

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
    if not master.startswith("k8s://") or len(master) == len("k8s://"):
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


def _k8s_operation(
    operation: str, master: str, namespace: str, driver_pod: str, spark_home: str | None, conf: Mapping[str, str]
) -> list[str]:
    _check_k8s_master(master)
    command = [spark_submit_path(spark_home), "--master", master]
    for key in sorted(conf):
        command += ["--conf", f"{key}={conf[key]}"]
    return [*command, operation, k8s_submission_id(namespace, driver_pod)]


def k8s_status_command(
    master: str, namespace: str, driver_pod: str, spark_home: str | None = None, conf: Mapping[str, str] | None = None
) -> list[str]:
    """``spark-submit --master k8s://… --status ns:pod``; `conf` may carry the client's credentials settings."""
    return _k8s_operation("--status", master, namespace, driver_pod, spark_home, conf or {})


def k8s_kill_command(
    master: str,
    namespace: str,
    driver_pod: str,
    spark_home: str | None = None,
    grace_period_s: int | None = None,
    conf: Mapping[str, str] | None = None,
) -> list[str]:
    """``spark-submit --master k8s://… --kill ns:pod``: deletes the driver pod (its executors follow)."""
    merged = dict(conf or {})
    if grace_period_s is not None:
        if grace_period_s < 0:
            raise ValueError(f"grace_period_s: {grace_period_s} must be >= 0 seconds")
        merged["spark.kubernetes.appKillPodDeletionGracePeriod"] = str(grace_period_s)
    return _k8s_operation("--kill", master, namespace, driver_pod, spark_home, merged)


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
    k8s_submission_id(namespace, driver_pod)
    if driver_pod.endswith("*"):
        raise ValueError(f"driver_pod: {driver_pod!r} must be a pod name here, not a pattern")
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
