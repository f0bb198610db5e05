"""The launchers: which one a connection gets, the exact commands they run, and their status, kill, driver-log
and link requests against local servers speaking YARN's and Kubernetes' REST shapes.

YARN and Kubernetes cannot run here; their spark-submit is a script that prints what the real one prints
(the application id line) and waits, so submit, wait, kill and the follow-up requests run for real.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_finegrained.launchers.base import (
    LaunchCancelled,
    Launcher,
    LaunchEvents,
    LaunchHandle,
    LaunchResult,
    LaunchSpec,
)
from airflow_provider_finegrained.launchers.kubernetes import KubernetesLauncher
from airflow_provider_finegrained.launchers.kubernetes.commands import driver_pod_name
from airflow_provider_finegrained.launchers.local import LocalLauncher
from airflow_provider_finegrained.launchers.select import select, submit_launcher
from airflow_provider_finegrained.launchers.standalone import StandaloneLauncher
from airflow_provider_finegrained.launchers.submitting import driver_program
from airflow_provider_finegrained.launchers.warm import WarmLauncher
from airflow_provider_finegrained.launchers.yarn import YarnLauncher
from airflow_provider_finegrained.settings import ConnectionSettings
from airflow_provider_finegrained.spark.java import SPARK_MODULE_OPTIONS
from airflow_provider_finegrained.spark.submit import python_runner_jar, standalone_driver_path
from airflow_provider_finegrained.warm import WarmPool
from tests.loopback_http import JsonHandler, serving

APP_ID = "application_1326821518301_0005"
SPEC = LaunchSpec(region="r1", app_name="dag.r1 [run try 1]", job_path="/data/_regions/r1/try=1/job.json")


def settings(host: str, **extra: Any) -> ConnectionSettings:
    return ConnectionSettings.from_connection_fields(host, extra, airflow_home="/srv/airflow")


def spark_home_with_submit(tmp_path: Path, script_body: str) -> str:
    """A Spark home (a spark-tags jar, a ``bin/spark-submit`` shell script of ``script_body``) under ``tmp_path``."""
    home = tmp_path / "spark"
    (home / "bin").mkdir(parents=True)
    (home / "jars").mkdir()
    (home / "jars" / "spark-tags_2.13-4.3.0.jar").write_text("")
    script = home / "bin" / "spark-submit"
    script.write_text("#!/bin/sh\n" + script_body)
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(home)


@pytest.fixture
def fake_home(tmp_path: Path) -> str:
    """A Spark home whose spark-submit prints its arguments, a YARN application id line, then sleeps."""
    return spark_home_with_submit(
        tmp_path,
        f'echo "$*" >> {tmp_path}/calls\n'
        # What a --properties-file holds, read while spark-submit runs (as the real one reads it).
        'prev=""; for a in "$@"; do\n'
        f'  [ "$prev" = --properties-file ] && cat "$a" >> {tmp_path}/properties; prev="$a"\n'
        "done\n"
        'case "$*" in *--status*) printf "Application status (driver):\\n\\t pod name: $FAKE_POD\\n'
        '\\t namespace: etl\\n\\t phase: Running\\n"; exit 0;; *--kill*) exit 0;; esac\n'
        f'echo "INFO Client: Submitted application {APP_ID}"\n'
        'if [ -n "$FAKE_EXIT" ]; then exit "$FAKE_EXIT"; fi\n'
        "exec sleep 60\n",
    )


# -- which launcher ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("master", "extra", "launcher", "capacity", "overhead"),
    [
        ("local[2]", {}, LocalLauncher, "local", True),
        ("local-cluster[2, 1, 1024]", {}, LocalLauncher, "local", True),
        ("spark://127.0.0.1:7077", {"total_cores": 4}, StandaloneLauncher, "standalone", False),
        ("yarn", {"total_cores": 4}, YarnLauncher, "declared", True),
        ("yarn", {"total_cores": 4, "yarn_resourcemanager_url": "http://rm:8088"}, YarnLauncher, "yarn", True),
        ("k8s://https://k8s.example.com:6443", {"total_cores": 4}, KubernetesLauncher, "declared", True),
        ("k8s://api-server", {"total_cores": 4}, KubernetesLauncher, "declared", True),
    ],
)
def test_select_picks_the_launcher_of_the_master_kind(
    master: str, extra: dict[str, Any], launcher: type, capacity: str, overhead: bool
) -> None:
    chosen = select(settings(master, **extra))
    assert type(chosen) is launcher
    assert isinstance(chosen, Launcher)
    assert (chosen.capacity_kind, chosen.count_overhead) == (capacity, overhead)


def test_select_picks_the_warm_pool_when_the_region_runs_warm() -> None:
    pool = WarmPool("sc://127.0.0.1:15002", None, None, "app-1", "http://127.0.0.1:4040", 0.0)
    chosen = select(settings("local[2]"), pool)
    assert isinstance(chosen, WarmLauncher) and isinstance(chosen, Launcher)
    assert chosen.capacity_kind == "none"
    assert chosen.application_conf("x") == {}
    assert chosen.ui_links("app-1").driver_ui_url == "http://127.0.0.1:4040"
    assert chosen.kill(None) == "nothing was started in the pool"
    with pytest.raises(LaunchCancelled, match="region r1 was killed before it started"):
        chosen.submit(SPEC)


# -- exact commands ------------------------------------------------------------------------------------


def test_local_command_and_environment(fake_home: str) -> None:
    launcher = submit_launcher(settings("local[2]", spark_home=fake_home))
    assert launcher.command(SPEC) == [
        f"{fake_home}/bin/spark-submit",
        "--master",
        "local[2]",
        "--deploy-mode",
        "client",
        "--name",
        SPEC.app_name,
        driver_program(),
        SPEC.job_path,
    ]
    env = launcher.request(SPEC).env
    assert env["PYTHONUNBUFFERED"] == "1" and env["SPARK_LOCAL_IP"]


def test_standalone_cluster_mode_runs_the_python_driver_through_python_runner(fake_home: str, tmp_path: Path) -> None:
    launcher = submit_launcher(
        settings(
            "spark://10.0.0.5:7077",
            total_cores=4,
            deploy_mode="cluster",
            spark_home=fake_home,
            storage_root=str(tmp_path),
        )
    )
    job = f"{tmp_path}/d/r/_regions/r1/try=1/job.json"
    spec = LaunchSpec("r1", "dag.r1", job, conf={"spark.executor.cores": "2"})
    command = launcher.command(spec)
    assert command[:5] == [sys.executable, "-m", "airflow_provider_finegrained.spark.standalone_driver", "submit", "--"]
    assert command[5:12] == [
        f"{fake_home}/bin/spark-submit",
        "--master",
        "spark://10.0.0.5:7077",
        "--deploy-mode",
        "cluster",
        "--name",
        "dag.r1",
    ]
    # The driver runs on a worker: what it starts from travels with its job on the storage root.
    program = f"{tmp_path}/d/r/_regions/r1/try=1/program"
    sources = [python_runner_jar(fake_home), standalone_driver_path(), driver_program()]
    shipped = [f"{program}/{os.path.basename(source)}" for source in sources]
    assert command[-6:] == [shipped[0], shipped[1], "", "run", shipped[2], job]
    for source, copy in zip(sources, shipped, strict=True):
        assert Path(copy).read_bytes() == Path(source).read_bytes()
    assert "spark.executor.cores=2" in command
    assert launcher.cluster_app_url("app-1") == "http://10.0.0.5:8080/app/?appId=app-1"


@pytest.mark.parametrize("own", ["", "-Duser.timezone=UTC"])
def test_a_standalone_cluster_mode_driver_gets_the_java_17_module_options(
    fake_home: str, tmp_path: Path, own: str
) -> None:
    # The worker starts the driver JVM with spark.driver.extraJavaOptions alone: without Spark's module options
    # the first date a driver wrote failed on the rehearsal (sun.util.calendar.ZoneInfo is not accessible).
    launcher = submit_launcher(
        settings("spark://10.0.0.5:7077", total_cores=4, deploy_mode="cluster", spark_home=fake_home,
                 storage_root=str(tmp_path))
    )  # fmt: skip
    conf = {"spark.driver.extraJavaOptions": own} if own else {}
    spec = LaunchSpec("r1", "dag.r1", f"{tmp_path}/d/r/_regions/r1/try=1/job.json", conf=conf)
    options = launcher.request(spec).conf["spark.driver.extraJavaOptions"].split()
    assert "--add-opens=java.base/sun.util.calendar=ALL-UNNAMED" in options
    assert options[: len(SPARK_MODULE_OPTIONS)] == list(SPARK_MODULE_OPTIONS)
    assert options[len(SPARK_MODULE_OPTIONS) :] == own.split()  # the user's own come last, and win


def test_a_client_mode_driver_keeps_its_java_options_as_given(fake_home: str) -> None:
    # spark-submit's launcher starts a client-mode driver itself, with Spark's module options.
    launcher = submit_launcher(settings("spark://10.0.0.5:7077", total_cores=4, spark_home=fake_home))
    spec = LaunchSpec("r1", "dag.r1", "/srv/job.json", conf={"spark.driver.extraJavaOptions": "-Da=b"})
    assert launcher.request(spec).conf["spark.driver.extraJavaOptions"] == "-Da=b"


def test_the_module_options_are_those_of_the_installed_spark_launcher() -> None:
    import zipfile

    from airflow_provider_finegrained.spark.submit import spark_home

    (jar,) = Path(spark_home(), "jars").glob("spark-launcher_*.jar")
    with zipfile.ZipFile(jar) as archive:
        constants = archive.read("org/apache/spark/launcher/JavaModuleOptions.class")
    found = re.findall(rb"(?:-XX:|--add-|-D)[\w.+/=-]+", constants)
    assert [option.decode() for option in found] == list(SPARK_MODULE_OPTIONS)


def test_standalone_cluster_mode_on_a_root_workers_cannot_mount_keeps_the_installations_paths(fake_home: str) -> None:
    # PythonRunner starts local files only: with an object-store root the workers' installation must match.
    launcher = submit_launcher(
        settings(
            "spark://10.0.0.5:7077",
            total_cores=4,
            deploy_mode="cluster",
            spark_home=fake_home,
            storage_root="s3://lake/fg",
        )
    )
    command = launcher.command(LaunchSpec("r1", "dag.r1", "s3://lake/fg/d/r/_regions/r1/try=1/job.json"))
    assert command[-6:] == [
        python_runner_jar(fake_home),
        standalone_driver_path(),
        "",
        "run",
        driver_program(),
        "s3://lake/fg/d/r/_regions/r1/try=1/job.json",
    ]


def test_yarn_client_and_cluster_commands(fake_home: str) -> None:
    client = submit_launcher(settings("yarn", total_cores=4, spark_home=fake_home))
    conf = {**client.application_conf(SPEC.app_name), "spark.yarn.queue": "etl"}
    assert client.command(LaunchSpec("r1", "dag.r1", "/shared/job.json", conf=conf)) == [
        f"{fake_home}/bin/spark-submit",
        "--master",
        "yarn",
        "--deploy-mode",
        "client",
        "--name",
        "dag.r1",
        "--conf",
        "spark.yarn.maxAppAttempts=1",
        "--conf",
        "spark.yarn.queue=etl",
        "--conf",
        "spark.yarn.submit.waitAppCompletion=true",
        driver_program(),
        "/shared/job.json",
    ]
    cluster = submit_launcher(settings("yarn", total_cores=4, deploy_mode="cluster", spark_home=fake_home))
    conf = {"spark.archives": "hdfs:///envs/fg.tar.gz#environment", "spark.pyspark.python": "./environment/bin/python"}
    assert cluster.command(LaunchSpec("r1", "dag.r1", "hdfs:///fg/_regions/r1/job.json", conf=conf)) == [
        f"{fake_home}/bin/spark-submit",
        "--master",
        "yarn",
        "--deploy-mode",
        "cluster",
        "--name",
        "dag.r1",
        "--conf",
        "spark.archives=hdfs:///envs/fg.tar.gz#environment",
        "--conf",
        "spark.pyspark.python=./environment/bin/python",
        "--conf",
        "spark.yarn.maxAppAttempts=1",
        "--conf",
        "spark.yarn.submit.waitAppCompletion=true",
        driver_program(),
        "hdfs:///fg/_regions/r1/job.json",
    ]


K8S_CONF = {
    "spark.kubernetes.container.image": "registry.example.com/fg:1",
    "spark.kubernetes.namespace": "etl",
    "spark.kubernetes.authenticate.driver.serviceAccountName": "spark",
    "spark.kubernetes.file.upload.path": "s3a://bucket/uploads",
}


def test_kubernetes_cluster_command_names_the_driver_pod(fake_home: str) -> None:
    launcher = submit_launcher(
        settings(
            "k8s://https://k8s.example.com:6443",
            total_cores=4,
            deploy_mode="cluster",
            spark_home=fake_home,
            spark_conf=K8S_CONF,
        )
    )
    assert isinstance(launcher, KubernetesLauncher)
    pod = driver_pod_name(SPEC.app_name)
    assert pod.startswith("fg-") and pod.endswith("-driver") and len(pod) == len("fg--driver") + 16
    app_conf = launcher.application_conf(SPEC.app_name)
    assert app_conf == {
        "spark.kubernetes.driver.pod.name": pod,
        "spark.kubernetes.submission.waitAppCompletion": "true",
    }
    command = launcher.command(LaunchSpec("r1", SPEC.app_name, "s3a://bucket/job.json", conf={**app_conf, **K8S_CONF}))
    assert command == [
        f"{fake_home}/bin/spark-submit",
        "--master",
        "k8s://https://k8s.example.com:6443",
        "--deploy-mode",
        "cluster",
        "--name",
        SPEC.app_name,
        "--conf",
        "spark.kubernetes.authenticate.driver.serviceAccountName=spark",
        "--conf",
        "spark.kubernetes.container.image=registry.example.com/fg:1",
        "--conf",
        f"spark.kubernetes.driver.pod.name={pod}",
        "--conf",
        "spark.kubernetes.file.upload.path=s3a://bucket/uploads",
        "--conf",
        "spark.kubernetes.namespace=etl",
        "--conf",
        "spark.kubernetes.submission.waitAppCompletion=true",
        driver_program(),
        "s3a://bucket/job.json",
    ]
    assert launcher.submission_id(SPEC) == f"etl:{pod}"


def test_kubernetes_cluster_mode_without_an_image_says_which_setting(fake_home: str) -> None:
    launcher = submit_launcher(
        settings("k8s://api-server:6443", total_cores=4, deploy_mode="cluster", spark_home=fake_home)
    )
    with pytest.raises(ValueError, match=r"image: spark\.kubernetes\.container\.image is required"):
        launcher.command(SPEC)


def test_kubernetes_client_mode_names_no_pod(fake_home: str) -> None:
    launcher = submit_launcher(settings("k8s://api-server:6443", total_cores=4, spark_home=fake_home))
    assert launcher.application_conf(SPEC.app_name) == {}
    assert launcher.submission_id(SPEC) is None


def calls(fake_home: str) -> list[str]:
    path = Path(fake_home).parent / "calls"
    return path.read_text().splitlines() if path.exists() else []


# -- YARN: a real submit, status, kill and log link against a server speaking the RM's REST shapes --------


class FakeRM:
    def __init__(self) -> None:
        self.url = ""
        self.requests: list[tuple[str, str, str]] = []
        self.state = "RUNNING"


@pytest.fixture
def resource_manager() -> Iterator[FakeRM]:
    rm = FakeRM()

    class Handler(JsonHandler):
        def _record(self) -> str:
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode() if length else ""
            rm.requests.append((self.command, self.path, body))
            return body

        def do_GET(self) -> None:
            self._record()
            container = f"container_{APP_ID[12:]}_01_000001"
            if self.path.endswith("/appattempts"):  # where the ApplicationMaster ran: this server plays its NM too
                node = rm.url.removeprefix("http://")
                self._answer(
                    200, {"appAttempts": {"appAttempt": [{"containerId": container, "nodeHttpAddress": node}]}}
                )
                return
            if self.path.startswith(f"/ws/v1/node/containerlogs/{container}/std"):
                body = self.path.split("/")[-1].encode() + b": Traceback (most recent call last):\nValueError: bad\n"
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return
            final = {"RUNNING": "UNDEFINED", "KILLED": "KILLED", "FINISHED": "FAILED"}[rm.state]
            self._answer(
                200,
                {
                    "app": {
                        "id": APP_ID,
                        "state": rm.state,
                        "finalStatus": final,
                        "diagnostics": "User class threw exception" if rm.state == "FINISHED" else "",
                        "amContainerLogs": f"http://nm-3:8042/node/containerlogs/container_{APP_ID[12:]}_01_000001/etl",
                    }
                },
            )

        def do_PUT(self) -> None:
            self._record()
            rm.state = "KILLED"
            self._answer(200, {"state": "KILLED"})

        def log_message(self, *args: Any) -> None:
            pass

    with serving(Handler) as rm.url:
        yield rm


def _submitted(
    launcher: Launcher, spec: LaunchSpec = SPEC
) -> tuple[LaunchHandle, list[str], threading.Thread, list[LaunchResult]]:
    """Submit and wait in a thread until the application id line has been seen."""
    seen: list[str] = []
    events = LaunchEvents(on_application=seen.append)
    handle = launcher.submit(spec, events)
    results: list[LaunchResult] = []
    waiter = threading.Thread(target=lambda: results.append(launcher.wait(handle)), daemon=True)
    waiter.start()
    deadline = time.monotonic() + 30
    while not seen and time.monotonic() < deadline:
        time.sleep(0.05)
    return handle, seen, waiter, results


def test_yarn_cluster_kill_stops_spark_submit_and_asks_the_rm(fake_home: str, resource_manager: FakeRM) -> None:
    launcher = submit_launcher(
        settings(
            "yarn",
            total_cores=4,
            deploy_mode="cluster",
            spark_home=fake_home,
            yarn_resourcemanager_url=resource_manager.url,
        )
    )
    handle, seen, waiter, results = _submitted(launcher)
    assert launcher.status(handle).state == "running"
    assert resource_manager.requests == [("GET", f"/ws/v1/cluster/apps/{APP_ID}", "")]
    message = launcher.kill(handle)
    assert message == f"YARN application {APP_ID}: KILLED"
    assert resource_manager.requests[-1] == ("PUT", f"/ws/v1/cluster/apps/{APP_ID}/state", '{"state": "KILLED"}')
    waiter.join(timeout=30)
    assert results[0].killed and results[0].application_id == APP_ID and seen == [APP_ID]
    assert launcher.status(handle).state == "killed"
    assert calls(fake_home)[0].startswith("--master yarn --deploy-mode cluster --name dag.r1 [run try 1]")


def test_yarn_failure_brings_the_driver_log_link_to_the_result(
    fake_home: str, resource_manager: FakeRM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_EXIT", "1")
    resource_manager.state = "FINISHED"
    launcher = submit_launcher(
        settings(
            "yarn",
            total_cores=4,
            deploy_mode="cluster",
            spark_home=fake_home,
            yarn_resourcemanager_url=resource_manager.url,
        )
    )
    handle = launcher.submit(SPEC)
    result = launcher.wait(handle)
    assert (result.returncode, result.application_id, result.succeeded) == (1, APP_ID, False)
    assert result.diagnostics == (
        f"YARN aggregated logs: yarn logs -applicationId {APP_ID}",
        f"YARN application page: {resource_manager.url}/cluster/app/{APP_ID}",
        f"driver (ApplicationMaster) log: http://nm-3:8042/node/containerlogs/container_{APP_ID[12:]}_01_000001/etl",
        "YARN diagnostics: User class threw exception",
        # The driver's own last words, from the NodeManager that ran its container (no `yarn` CLI needed).
        "driver stdout (last 32 KiB, from its NodeManager):",
        "stdout?size=-32768: Traceback (most recent call last):",
        "ValueError: bad",
        "driver stderr (last 32 KiB, from its NodeManager):",
        "stderr?size=-32768: Traceback (most recent call last):",
        "ValueError: bad",
    )
    assert launcher.status(handle).state == "failed"
    assert launcher.ui_links(APP_ID).cluster_app_url == f"{resource_manager.url}/cluster/app/{APP_ID}"


# -- Kubernetes: status and kill with spark-submit, the driver log from the API ----------------------------


@pytest.fixture
def k8s_api() -> Iterator[tuple[str, list[tuple[str, dict[str, str]]]]]:
    seen: list[tuple[str, dict[str, str]]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append((self.path, dict(self.headers)))
            body = b"Traceback (most recent call last):\nValueError: stage s1 broke\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    with serving(Handler) as url:
        yield url.removeprefix("http://"), seen


def test_kubernetes_status_kill_and_driver_log(
    fake_home: str, k8s_api: tuple[str, list[tuple[str, dict[str, str]]]], monkeypatch: pytest.MonkeyPatch
) -> None:
    address, seen = k8s_api
    conf = {**K8S_CONF, "spark.kubernetes.authenticate.submission.oauthToken": "t0ken"}
    master = f"k8s://http://{address}"
    launcher = submit_launcher(
        settings(master, total_cores=4, deploy_mode="cluster", spark_home=fake_home, spark_conf=conf)
    )
    assert isinstance(launcher, KubernetesLauncher)
    pod = driver_pod_name(SPEC.app_name)
    monkeypatch.setenv("FAKE_POD", pod)
    spec = LaunchSpec(
        "r1", SPEC.app_name, "s3a://bucket/job.json", conf={**launcher.application_conf(SPEC.app_name), **conf}
    )
    handle, _seen, waiter, results = _submitted(launcher, spec)
    assert handle.submission_id == f"etl:{pod}"
    status = launcher.status(handle)
    assert (status.state, status.detail) == ("running", "driver pod phase Running")
    log = launcher.driver_log(handle)
    assert log is not None and "ValueError: stage s1 broke" in log
    path, headers = seen[0]
    assert path == f"/api/v1/namespaces/etl/pods/{pod}/log?tailLines=200"
    assert headers["Authorization"] == "Bearer t0ken"
    assert launcher.kill(handle) == f"asked Kubernetes to delete driver pod etl:{pod}"
    waiter.join(timeout=30)
    assert results[0].killed
    # The token reached every spark-submit through its private properties file, never its command line.
    submit_call, status_call, kill_call = calls(fake_home)
    file_args = r"--properties-file (/\S+/finegrained-conf-[\w-]+/secret\.properties) --load-spark-defaults"
    assert re.fullmatch(rf"--master {re.escape(master)} --deploy-mode cluster .*{file_args} .*", submit_call)
    assert re.fullmatch(rf"--master {re.escape(master)} {file_args} --status etl:{pod}", status_call)
    assert re.fullmatch(rf"--master {re.escape(master)} {file_args} --kill etl:{pod}", kill_call)
    assert "t0ken" not in submit_call + status_call + kill_call
    token_line = "spark.kubernetes.authenticate.submission.oauthToken=t0ken"
    assert (Path(fake_home).parent / "properties").read_text().splitlines().count(token_line) == 3
    # Each file is gone once its spark-submit is done with it.
    for call in (submit_call, status_call, kill_call):
        file = re.search(file_args, call)
        assert file is not None and not os.path.exists(os.path.dirname(file.group(1)))
    # A retry in another process that follows the application kills it the same way (it once raised on the token).
    from dataclasses import replace

    from airflow_provider_finegrained.launchers.remote import RemoteApplication

    followed = replace(handle, deploy_mode="cluster")  # as the region runner records it
    assert RemoteApplication(launcher.settings, followed).kill() == f"asked Kubernetes to delete driver pod etl:{pod}"
    followed_kill = calls(fake_home)[-1]
    assert re.fullmatch(rf"--master {re.escape(master)} {file_args} --kill etl:{pod}", followed_kill)
    assert "t0ken" not in followed_kill


def test_kill_before_submit_cancels_it(fake_home: str) -> None:
    launcher = submit_launcher(settings("local[1]", spark_home=fake_home))
    assert launcher.kill(None) == "nothing was submitted"
    with pytest.raises(LaunchCancelled, match="region r1 was killed before it was submitted"):
        launcher.submit(SPEC)
    assert calls(fake_home) == []


# -- standalone cluster mode: a failed driver's stderr comes from its worker ------------------------------

DRIVER = "driver-20261123000000-0001"


@pytest.fixture
def standalone_master() -> Iterator[tuple[str, list[str]]]:
    """A server answering like a standalone master's /json/ and its worker's /log/ page."""
    seen: list[str] = []
    base: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            if self.path.startswith("/json"):
                payload = {
                    "status": "ALIVE",
                    "workers": [{"id": "worker-1", "state": "ALIVE", "webuiaddress": base[0]}],
                    "activedrivers": [],
                    "completeddrivers": [{"id": DRIVER, "worker": "worker-1", "state": "FAILED"}],
                }
                body, kind = json.dumps(payload).encode(), "application/json"
            else:
                body, kind = (
                    b"==== Bytes 0-40 of 40 of /work/driver/stderr ====\nValueError: stage s1 broke\n",
                    "text/plain",
                )
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    with serving(Handler) as url:
        base.append(url)
        yield url, seen


def test_standalone_cluster_failure_brings_the_driver_stderr(
    tmp_path: Path, standalone_master: tuple[str, list[str]]
) -> None:
    base, seen = standalone_master
    # What Spark's legacy submission client prints, and its exit code 0 whatever the driver's end.
    home = spark_home_with_submit(
        tmp_path,
        f'echo "INFO ClientEndpoint: Driver successfully submitted as {DRIVER}"\n'
        f'echo "INFO ClientEndpoint: State of driver {DRIVER} is FAILED, exiting"\n',
    )
    launcher = submit_launcher(
        settings(
            "spark://127.0.0.1:7077",
            total_cores=4,
            deploy_mode="cluster",
            spark_home=home,
            master_webui_url=base,
        )
    )
    assert isinstance(launcher, StandaloneLauncher)
    handle = launcher.submit(SPEC)
    result = launcher.wait(handle)
    assert (result.returncode, result.driver_id, result.killed) == (1, DRIVER, False)
    assert result.diagnostics == (
        f"driver {DRIVER} stderr (last 64 KiB):",
        "ValueError: stage s1 broke",
    )
    assert seen[-1] == f"/log/?driverId={DRIVER}&logType=stderr&byteLength=65536"
    assert launcher.ui_links("app-1").cluster_app_url == f"{base}/app/?appId=app-1"


GiB = 2**30


@pytest.mark.parametrize(
    ("deploy_mode", "conf", "expected"),
    [
        ("client", {"spark.driver.memory": "4g"}, (0, 0)),  # the driver is the task's child: no worker holds it
        ("cluster", {}, (1, 1 * GiB)),  # Spark's defaults: 1 core, 1 GiB, and a standalone worker books no overhead
        ("cluster", {"spark.driver.cores": "2", "spark.driver.memory": "3g"}, (2, 3 * GiB)),
    ],
)
def test_a_standalone_cluster_mode_driver_is_booked_on_a_worker(
    deploy_mode: str, conf: dict[str, str], expected: tuple[int, int]
) -> None:
    launcher = StandaloneLauncher(
        settings("spark://master:7077", deploy_mode=deploy_mode, total_cores=2, total_memory="4g")
    )
    assert launcher.master_container(conf) == expected


def test_two_cluster_mode_regions_never_hold_every_core_with_their_drivers() -> None:
    # Seen on the multi-host rehearsal: two one-core workers, two regions admitted at once, each driver on a
    # worker's only core, both applications WAITING for executors forever. With the driver booked, the first
    # region takes one worker for its driver and the other for its executor; the second waits its turn.
    from airflow_provider_finegrained.planning.capacity import ExecutorRequest, WorkerCapacity, decide_capacity

    launcher = StandaloneLauncher(
        settings("spark://master:7077", deploy_mode="cluster", total_cores=2, total_memory="4g")
    )
    cores, memory = launcher.master_container({})
    request = ExecutorRequest(executors=2, cores=1, memory=1 * GiB, parallelism=2, master_cores=cores,
                              master_memory=memory)  # fmt: skip
    idle = [WorkerCapacity(1, 2 * GiB), WorkerCapacity(1, 2 * GiB)]
    first = decide_capacity(request, idle)
    assert (first.outcome, first.executors) == ("reduced", 1)
    after_first = [
        WorkerCapacity(0, 1 * GiB),
        WorkerCapacity(0, 1 * GiB),
    ]  # its driver on one, its executor on the other
    second = decide_capacity(request, after_first)
    assert (second.outcome, second.executors) == ("wait", 0)


def test_a_bad_driver_cores_setting_is_named_with_what_is_allowed() -> None:
    launcher = StandaloneLauncher(
        settings("spark://master:7077", deploy_mode="cluster", total_cores=2, total_memory="4g")
    )
    with pytest.raises(ValueError, match=r"spark.driver.cores: '0'; allowed: a whole number of at least 1"):
        launcher.master_container({"spark.driver.cores": "0"})
