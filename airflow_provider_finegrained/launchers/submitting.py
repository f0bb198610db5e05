"""What every spark-submit launcher shares: building the command, running it, streaming it, stopping it.

The cluster managers differ in the request they submit (``request``), the settings they need
(``application_conf``), what is left running on the cluster when spark-submit is stopped
(``kill_remote``), where the driver's log is (``driver_log``) and where the application is shown
(``cluster_app_url``); each launcher overrides those.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import replace

from airflow_provider_finegrained.launchers.base import (
    CapacityKind,
    LaunchCancelled,
    LaunchEvents,
    LaunchHandle,
    LaunchResult,
    LaunchSpec,
    LaunchState,
    LaunchStatus,
    LogLike,
)
from airflow_provider_finegrained.launchers.links import SparkUITargets, ui_targets
from airflow_provider_finegrained.launchers.master import MasterKind
from airflow_provider_finegrained.settings.cluster import ClusterSettings
from airflow_provider_finegrained.spark.java import check_java
from airflow_provider_finegrained.spark.process import SparkSubmitCancelled, SparkSubmitProcess
from airflow_provider_finegrained.spark.properties_file import secret_properties_file
from airflow_provider_finegrained.spark.submit import (
    SubmitRequest,
    build_spark_submit_command,
    build_spark_submit_env,
    redacted_command,
    secret_conf,
)

_DRIVER_ID_PREFIX = "driver-"


def driver_program() -> str:
    """The program every region's driver runs (``runtime/driver.py``): it reads the region job and runs it."""
    from airflow_provider_finegrained.runtime import driver

    return os.path.abspath(driver.__file__)


class SparkSubmitLauncher:
    """A region's application submitted with spark-submit; the base of the cluster managers' launchers."""

    name = "spark-submit"
    kinds: frozenset[MasterKind] = frozenset()
    capacity_kind: CapacityKind = "declared"
    count_overhead = True
    ships_python_env = False

    def __init__(self, settings: ClusterSettings, log: LogLike | None = None) -> None:
        self.settings = ClusterSettings.of(settings)  # the cluster concern only, whatever the caller holds
        self.log: LogLike = log or logging.getLogger(__name__)
        self._lock = threading.Lock()
        self._process: SparkSubmitProcess | None = None
        self._killed = False
        self._secret_file: contextlib.ExitStack | None = None

    # -- what the cluster managers override ---------------------------------------------------------

    def application_conf(self, app_name: str) -> dict[str, str]:
        return {}

    def master_container(self, conf: Mapping[str, str]) -> tuple[int, int]:
        return (0, 0)

    def env(self, spec: LaunchSpec) -> dict[str, str]:
        env = {"PYTHONUNBUFFERED": "1"}
        if self.settings.java_home:
            env["JAVA_HOME"] = self.settings.java_home
        if self.settings.hadoop_conf_dir:
            env["HADOOP_CONF_DIR"] = env["YARN_CONF_DIR"] = self.settings.hadoop_conf_dir
        env.update(spec.env)
        return env

    def request(self, spec: LaunchSpec) -> SubmitRequest:
        return SubmitRequest(
            application=driver_program(),
            master=self.settings.master,
            deploy_mode=self.settings.deploy_mode,
            name=spec.app_name,
            conf=spec.conf,
            application_args=[spec.job_path],
            env=self.env(spec),
        )

    def submission_id(self, spec: LaunchSpec) -> str | None:
        return None

    def kill_remote(self, handle: LaunchHandle | None, process: SparkSubmitProcess) -> str:
        """Stop what runs on the cluster after spark-submit itself is gone; say what was done."""
        return "spark-submit and every process it started were stopped"

    def driver_log(self, handle: LaunchHandle) -> str | None:
        return None

    def cluster_app_url(self, application_id: str) -> str | None:
        return None

    # -- the shared machinery --------------------------------------------------------------------------

    def command(self, spec: LaunchSpec, properties_file: str | None = None) -> list[str]:
        """The exact argument list that submits ``spec`` (no shell); its secrets are in ``properties_file``."""
        return build_spark_submit_command(self.request(spec), self.settings.spark_home, properties_file)

    def submit(self, spec: LaunchSpec, events: LaunchEvents | None = None) -> LaunchHandle:
        check_java(self.settings.java_home)
        events = events or LaunchEvents()
        request = self.request(spec)
        # The secret settings go in a private file, never on the command line; it lives until spark-submit
        # has surely read it (see _release_secret_file).
        secret_file = contextlib.ExitStack()
        try:
            path = secret_file.enter_context(secret_properties_file(secret_conf(request)))
            handle = self._start(spec, request, events, path)
        except BaseException:
            secret_file.close()
            raise
        with self._lock:
            self._secret_file = secret_file
        return handle

    def _release_secret_file(self) -> None:
        """Remove the secret properties file: spark-submit reads it while it starts and never again."""
        with self._lock:
            secret_file, self._secret_file = self._secret_file, None
        if secret_file is not None:
            secret_file.close()

    def _start(self, spec: LaunchSpec, request: SubmitRequest, events: LaunchEvents, path: str | None) -> LaunchHandle:
        command = build_spark_submit_command(request, self.settings.spark_home, properties_file=path)
        self.log.info(
            "Submitting region %s to %s: %s", spec.region, self.settings.master, " ".join(redacted_command(command))
        )

        def on_id(found: str) -> None:
            # An application or driver id: spark-submit parsed its arguments (and the file) long ago.
            # Removing the file now keeps it from outliving a task killed with SIGKILL (no finally runs then).
            self._release_secret_file()
            if found.startswith(_DRIVER_ID_PREFIX):  # standalone cluster mode names its driver too
                self.log.info("Spark driver id: %s", found)
            else:
                self.log.info("Spark application id: %s", found)
                events.on_application(found)

        process = SparkSubmitProcess(
            command,
            build_spark_submit_env(request, spark_home=self.settings.spark_home),
            on_line=events.on_line,
            app_id_callback=on_id,
            timeout=spec.timeout_s,
        )
        with self._lock:
            if self._killed:
                raise LaunchCancelled(f"region {spec.region} was killed before it was submitted")
            self._process = process
        try:
            process.start()
        except SparkSubmitCancelled:
            raise LaunchCancelled(f"region {spec.region} was killed before it was submitted") from None
        return LaunchHandle(self.name, spec.app_name, self.submission_id(spec))

    def _started(self) -> SparkSubmitProcess:
        if self._process is None:
            raise RuntimeError(f"{self.name} launcher: nothing was submitted")
        return self._process

    def wait_named(self, handle: LaunchHandle) -> LaunchHandle:
        process = self._started()
        process.follow_until(lambda: self.is_named(self.named(handle)))
        return self.named(handle)

    def is_named(self, handle: LaunchHandle) -> bool:
        """Whether the application is named well enough for another process to follow it."""
        return handle.identified()

    def named(self, handle: LaunchHandle) -> LaunchHandle:
        """``handle`` with the ids spark-submit has reported so far."""
        process = self._started()
        return replace(
            handle,
            application_id=handle.application_id or process.application_id,
            driver_id=handle.driver_id or process.driver_id,
        )

    def detach(self, handle: LaunchHandle) -> None:
        # spark-submit only follows a driver that runs on the cluster: stopping it leaves the application be.
        try:
            self._started().kill()
        finally:
            self._release_secret_file()

    def wait(self, handle: LaunchHandle) -> LaunchResult:
        try:
            result = self._started().wait()
        finally:
            self._release_secret_file()
        diagnostics: tuple[str, ...] = ()
        if result.returncode != 0 and not result.killed:
            try:
                log = self.driver_log(handle)
            except Exception as exc:  # a diagnostic that cannot be had must not hide the failure itself
                log = f"the driver's log could not be read: {exc}"
            diagnostics = tuple(log.splitlines()) if log else ()
        return LaunchResult(**vars(result), diagnostics=diagnostics)

    def status(self, handle: LaunchHandle) -> LaunchStatus:
        process = self._process
        if process is None:
            return LaunchStatus("killed" if self._killed else "pending")
        code = process.returncode
        if code is None:
            return LaunchStatus("running", process.application_id, process.driver_id)
        state: LaunchState = "killed" if self._killed else ("succeeded" if code == 0 else "failed")
        return LaunchStatus(state, process.application_id, process.driver_id, f"spark-submit exited with code {code}")

    def kill(self, handle: LaunchHandle | None) -> str:
        with self._lock:
            self._killed = True
            process = self._process
        if process is None:
            return "nothing was submitted"
        try:
            process.kill()
        finally:
            self._release_secret_file()
        return self.kill_remote(handle, process)

    def ui_links(self, application_id: str | None, driver_ui_url: str | None = None) -> SparkUITargets:
        cluster = self.cluster_app_url(application_id) if application_id else None
        return ui_targets(application_id, driver_ui_url, cluster, self.settings.history_server_url)
