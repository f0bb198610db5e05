"""The "Spark UI" extra link: its targets per cluster kind, and its XCom after real runs of hello_stages."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_finegrained.operators.links import (
    SPARK_UI_KEY,
    LiveLink,
    SparkUILink,
    SparkUITargets,
    driver_ui_from_line,
    spark_ui_targets,
)
from airflow_provider_finegrained.settings import ConnectionSettings
from tests.e2e.conftest import _install_examples, load_dag, run_xcoms


def settings(host: str, **extra: Any) -> ConnectionSettings:
    return ConnectionSettings.from_connection_fields(host, extra, airflow_home="/srv/airflow")


def test_local_application_links_only_its_driver_ui_and_history() -> None:
    plain = spark_ui_targets(settings("local[2]"), "local-1700000000000", "http://127.0.0.1:4040")
    assert plain == SparkUITargets("local-1700000000000", "http://127.0.0.1:4040", None, None)
    assert plain.live_target() == "http://127.0.0.1:4040"
    history = spark_ui_targets(
        settings("local[2]", history_server_url="http://spark-history:18080/"), "local-1700000000000"
    )
    assert history.history_url == "http://spark-history:18080/history/local-1700000000000/jobs/"
    assert history.live_target() == history.ended_target() == history.history_url


def test_standalone_links_the_masters_application_page() -> None:
    standalone = settings("spark://10.0.0.5:7077", total_cores=4)
    targets = spark_ui_targets(standalone, "app-20261122012459-0003", None)
    assert targets.cluster_app_url == "http://10.0.0.5:8080/app/?appId=app-20261122012459-0003"
    assert targets.ended_target() == targets.live_target() == targets.cluster_app_url
    webui = settings("spark://10.0.0.5:7077", total_cores=4, master_webui_url="http://master-ui:18080")
    assert spark_ui_targets(webui, "app-1", None).cluster_app_url == "http://master-ui:18080/app/?appId=app-1"


def test_yarn_links_the_resourcemanager_and_history_wins_once_ended() -> None:
    yarn = settings(
        "yarn",
        total_cores=8,
        yarn_resourcemanager_url="http://rm:8088",
        history_server_url="https://history.example.com",
    )
    targets = spark_ui_targets(yarn, "application_1700000000000_0042", "http://node-7:4040")
    assert targets.cluster_app_url == "http://rm:8088/cluster/app/application_1700000000000_0042"
    assert targets.live_target() == "http://node-7:4040"
    assert targets.ended_target() == "https://history.example.com/history/application_1700000000000_0042/jobs/"


def test_links_never_carry_credentials() -> None:
    targets = spark_ui_targets(
        settings(
            "spark://10.0.0.5:7077",
            total_cores=4,
            master_webui_url="http://admin:hunter22@master-ui:8080",
            history_server_url="https://reader:s3cret@history:18480",
        ),
        "app-1",
        None,
    )
    text = json.dumps(targets.to_xcom())
    assert "hunter22" not in text and "s3cret" not in text and "admin" not in text and "reader" not in text
    assert targets.history_url == "https://history:18480/history/app-1/jobs/"
    assert targets.cluster_app_url == "http://master-ui:8080/app/?appId=app-1"


def test_no_application_no_link() -> None:
    targets = spark_ui_targets(settings("local[1]", history_server_url="http://h:18080"), None)
    assert targets.ended_target() == "" and targets.history_url is None
    assert SparkUITargets.from_xcom(None) is None
    assert SparkUITargets.from_xcom({"application_id": "a", "future_field": 1}) == SparkUITargets("a")


def test_driver_ui_from_spark_submit_lines() -> None:
    # As spark-submit of pyspark 4.3 prints it (measured), and as older releases did.
    assert driver_ui_from_line("26/11/22 07:39:41 INFO JettyUtils: Start Jetty 127.0.0.1:4040 for SparkUI") == (
        "http://127.0.0.1:4040"
    )
    line = "26/11/22 01:24:59 INFO SparkUI: Bound SparkUI to 127.0.0.1, and started at http://localhost:4041"
    assert driver_ui_from_line(line) == "http://localhost:4041"
    assert driver_ui_from_line("INFO JettyUtils: Start Jetty 0.0.0.0:4040 for SparkUI") is None
    assert driver_ui_from_line("INFO Utils: Successfully started service 'SparkUI' on port 4041.") is None


@pytest.fixture
def spark_ui_server() -> Iterator[tuple[str, dict[str, Any]]]:
    """A stand-in for a driver's status API: answers /api/v1/applications/<id> for the ids in ``apps``."""
    apps: dict[str, Any] = {}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            app = self.path.removeprefix("/api/v1/applications/")
            if app not in apps:
                self.send_error(404)
                return
            body = json.dumps({"id": app, "name": apps[app]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", apps
    finally:
        server.shutdown()
        server.server_close()


def test_ended_link_keeps_a_driver_ui_only_while_it_serves_the_application(
    spark_ui_server: tuple[str, dict[str, Any]],
) -> None:
    url, apps = spark_ui_server
    targets = SparkUITargets("app-7", url, "http://master:8080/app/?appId=app-7", None)
    apps["app-7"] = "a long-lived driver"
    assert targets.ended_target() == url
    del apps["app-7"]
    apps["app-8"] = "a later application on the same port"
    assert targets.ended_target() == "http://master:8080/app/?appId=app-7"
    assert SparkUITargets("app-7", url).ended_target() == ""


def test_link_identity() -> None:
    link = SparkUILink()
    assert link.name == "Spark UI" and link.xcom_key == "_link_SparkUILink"
    from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator

    assert [type(x) for x in SparkStageOperator.operator_extra_links] == [SparkUILink]


# -- real runs --------------------------------------------------------------------------------------------------


@pytest.fixture
def examples(airflow_db: None) -> Path:
    return _install_examples()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def history_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real Spark history server on a free loopback port, reading event logs from a temporary folder."""
    from airflow_provider_finegrained.spark.submit import spark_home

    events = tmp_path / "spark-events"
    events.mkdir()
    port = free_port()
    properties = tmp_path / "history.properties"
    properties.write_text(
        f"spark.history.fs.logDirectory file://{events}\n"
        f"spark.history.ui.port {port}\n"
        "spark.history.fs.update.interval 1s\n"
    )
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(tmp_path)}
    command = [
        os.path.join(spark_home(), "bin", "spark-class"),
        "org.apache.spark.deploy.history.HistoryServer",
        "--properties-file",
        str(properties),
    ]
    log = (tmp_path / "history.log").open("wb")
    process = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: http_status(f"{url}/api/v1/applications") == 200, 120, "the history server to answer")
        yield url, events
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # its own session: spark-class and the JVM it starts
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
        log.close()


def http_status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def wait_for(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what} after {timeout_s:g} s")
        time.sleep(0.5)


@pytest.mark.slow
@pytest.mark.spark
def test_hello_stages_links_to_a_real_history_server(
    examples: Path, monkeypatch: pytest.MonkeyPatch, history_server: tuple[str, Path]
) -> None:
    url, events = history_server
    with_credentials = url.replace("http://", "http://viewer:pa55word@")
    monkeypatch.setenv(
        "AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT",
        json.dumps(
            {
                "conn_type": "finegrained_spark",
                "host": "local[2]",
                "extra": {
                    "history_server_url": with_credentials,
                    "spark_conf": {"spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{events}"},
                },
            }
        ),
    )
    dag = load_dag(examples / "hello_stages.py", "hello_stages")
    run = dag.test()
    assert run.state == "success"
    targets = run_xcoms("hello_stages", run.run_id, SPARK_UI_KEY)
    links = run_xcoms("hello_stages", run.run_id, SparkUILink().xcom_key)
    for stage in ("numbers", "squares"):
        app = targets[stage]["application_id"]
        assert links[stage] == f"{url}/history/{app}/jobs/"
        # The history server really shows that application's jobs there (once it has read the event log).
        link: str = links[stage]
        wait_for(lambda: http_status(link) == 200, 60, f"{link} to answer")  # noqa: B023 - used at once
        with urllib.request.urlopen(f"{url}/api/v1/applications/{app}/jobs", timeout=10) as response:
            assert json.loads(response.read()), f"no jobs of {app} in the history server"
    assert "pa55word" not in json.dumps([targets, links])


class RecordingTI:
    """What a task instance's xcom_push received (the link's XCom rows while the region runs)."""

    def __init__(self) -> None:
        self.pushed: list[tuple[str, Any]] = []

    def xcom_push(self, key: str, value: Any) -> None:
        self.pushed.append((key, value))


def test_live_link_follows_spark_submit_output() -> None:
    ti = RecordingTI()
    live = LiveLink(ti, settings("local[2]", history_server_url="http://h:18080"))
    live.on_line("26/11/22 07:39:41 INFO JettyUtils: Start Jetty 127.0.0.1:4041 for SparkUI")
    assert ti.pushed == []  # no application yet: nothing to name
    live.on_application("local-1795405432123")
    live.on_application("local-1795405432123")
    assert ti.pushed == [
        (
            SPARK_UI_KEY,
            {
                "application_id": "local-1795405432123",
                "driver_ui_url": "http://127.0.0.1:4041",
                "cluster_app_url": None,
                "history_url": "http://h:18080/history/local-1795405432123/jobs/",
            },
        ),
        ("_link_SparkUILink", "http://127.0.0.1:4041"),
    ]
