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
import subprocess
from typing import TYPE_CHECKING

from airflow_provider_finegrained.launchers.base import CapacityKind, LaunchHandle, LaunchSpec, LaunchStatus
from airflow_provider_finegrained.launchers.http import HttpRequestError, send
from airflow_provider_finegrained.launchers.kubernetes.commands import (
    COMMAND_TIMEOUT_S,
    DEFAULT_NAMESPACE,
    DRIVER_LOG_LINES,
    POD_PHASE_STATES,
    TOKEN_CONF,
    TOKEN_FILE_CONF,
    driver_pod_name,
    k8s_cluster_submit_request,
    k8s_driver_log_request,
    k8s_kill_command,
    k8s_status_command,
    k8s_submission_id,
    parse_k8s_status_output,
)
from airflow_provider_finegrained.launchers.master import MasterKind, parse_master
from airflow_provider_finegrained.launchers.submitting import SparkSubmitLauncher, driver_program
from airflow_provider_finegrained.spark.process import SparkSubmitProcess
from airflow_provider_finegrained.spark.properties_file import secret_properties_file, split_secret_conf
from airflow_provider_finegrained.spark.submit import SubmitRequest

if TYPE_CHECKING:
    from airflow_provider_finegrained.settings.cluster import ClusterSettings


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

    def is_named(self, handle: LaunchHandle) -> bool:
        # The driver pod is named before it exists: followed from elsewhere once Spark reported the application.
        return handle.application_id is not None

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
        state = POD_PHASE_STATES.get(phase, "unknown")
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
        if conf.get(TOKEN_CONF):
            return str(conf[TOKEN_CONF])
        if conf.get(TOKEN_FILE_CONF):
            with open(str(conf[TOKEN_FILE_CONF]), encoding="utf-8") as handle:
                return handle.read().strip()
        return None


def follow_status(settings: ClusterSettings, handle: LaunchHandle) -> LaunchStatus:
    """The driver pod's phase, from ``spark-submit --status`` (``launchers.remote``)."""
    return KubernetesLauncher(settings).status(handle)


def kill_followed(settings: ClusterSettings, handle: LaunchHandle) -> str:
    """Delete the driver pod with ``spark-submit --kill`` (``launchers.remote``), as the launcher that submitted
    it would: submission credentials such as an OAuth token in a private properties file, never in argv."""
    return KubernetesLauncher(settings).delete_driver_pod(handle)
