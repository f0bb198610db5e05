"""The "Spark UI" extra link: its targets per cluster kind, and its XCom after real runs of hello_stages."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_finegrained.hooks.settings import ConnectionSettings
from airflow_provider_finegrained.operators.links import (
    SPARK_UI_KEY,
    SparkUILink,
    SparkUITargets,
    driver_ui_from_line,
    spark_ui_targets,
)
from tests.e2e.conftest import _install_examples, load_dag


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


def test_bound_ui_line_of_spark_submit() -> None:
    line = "26/11/22 01:24:59 INFO SparkUI: Bound SparkUI to 127.0.0.1, and started at http://localhost:4041"
    assert driver_ui_from_line(line) == "http://localhost:4041"
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


def run_xcoms(dag_id: str, run_id: str, key: str) -> dict[str, Any]:
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows: list[Any] = list(session.scalars(XComModel.get_many(run_id=run_id, dag_ids=dag_id, key=key)))
        return {row.task_id: XComModel.deserialize_value(row) for row in rows}


@pytest.fixture
def examples(airflow_db: None) -> Path:
    return _install_examples()


@pytest.mark.slow
def test_hello_stages_links(examples: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dag = load_dag(examples / "hello_stages.py", "hello_stages")
    # (a) the embedded default: local Spark and no history server. The applications have ended when the
    # link is computed and nothing keeps their UI: no link, but the application ids are recorded.
    monkeypatch.delenv("AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT", raising=False)
    run = dag.test()
    assert run.state == "success"
    targets = run_xcoms("hello_stages", run.run_id, SPARK_UI_KEY)
    links = run_xcoms("hello_stages", run.run_id, SparkUILink().xcom_key)
    assert set(targets) == set(links) == {"numbers", "squares"}
    ids = {t: v["application_id"] for t, v in targets.items()}
    assert all(i.startswith("local-") for i in ids.values()) and ids["numbers"] != ids["squares"]
    assert links == {"numbers": "", "squares": ""}

    # (b) a history server in the connection (with credentials, which the link drops).
    monkeypatch.setenv(
        "AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT",
        json.dumps(
            {
                "conn_type": "finegrained_spark",
                "host": "local[2]",
                "extra": {"history_server_url": "http://viewer:pa55word@127.0.0.1:18080/"},
            }
        ),
    )
    run = dag.test()
    assert run.state == "success"
    targets = run_xcoms("hello_stages", run.run_id, SPARK_UI_KEY)
    links = run_xcoms("hello_stages", run.run_id, SparkUILink().xcom_key)
    for stage in ("numbers", "squares"):
        app = targets[stage]["application_id"]
        assert app.startswith("local-")
        assert links[stage] == f"http://127.0.0.1:18080/history/{app}/jobs/"
    assert "pa55word" not in json.dumps([targets, links])
