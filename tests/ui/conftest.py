"""UI end-to-end fixtures: sized runs of a small stage DAG, one api-server, one headless Chromium."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, warm_embedded_default
from tests.ui.dag_text import DAG_FILE, DAG_ID, DAG_TEXT

ROWS = (2_000, 20_000, 200_000)
"""Rows of the source stage per run: the consumer's input grows tenfold each time."""
BASE_PATH = "/airflow"
"""The path of ``[api] base_url`` of the prefixed api-server."""
PASSWORDS = {"admin": "admin-pw", "outsider": "outsider-pw"}
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,800",
)


@pytest.fixture(scope="module")
def sized_runs(_embedded_warm_pool: str) -> list[str]:
    """Run the DAG once per row count (real Spark, the embedded default's warm pool: a region's start-up is
    not what these tests look at); a small bytes-per-task makes parallelism follow."""
    from airflow_provider_finegrained.spark.submit import environ_restored
    from tests.e2e.conftest import load_dag, write_dag_file

    key = "AIRFLOW__FINEGRAINED__AVG_BYTES_PER_TASK"
    with environ_restored([key]), warm_embedded_default():
        os.environ[key] = "256k"
        dag = load_dag(write_dag_file(DAG_FILE, DAG_TEXT), DAG_ID)
        run_ids = []
        for rows in ROWS:
            run = dag.test(run_conf={"rows": rows})
            assert run.state == "success", [(ti.task_id, ti.state) for ti in run.get_task_instances()]
            run_ids.append(run.run_id)
        return run_ids


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class Server:
    base: str

    def token(self, user: str) -> str:
        body = json.dumps({"username": user, "password": PASSWORDS[user]}).encode()
        request = urllib.request.Request(
            self.base + "/auth/token", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return str(json.load(response)["access_token"])

    def get(self, path: str, token: str | None = None) -> tuple[int, Any]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        try:
            with urllib.request.urlopen(urllib.request.Request(self.base + path, headers=headers), timeout=60) as r:
                return r.status, json.load(r)
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")


@pytest.fixture(scope="module")
def api_server(airflow_db: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``airflow api-server`` on a free port, same AIRFLOW_HOME, in its own process group; stopped after.

    It reads the database per request: tests that need runs ask for ``sized_runs`` first, so the runs
    happen before the server starts and do not compete with it for the CPU.
    """
    yield from serve(tmp_path_factory.mktemp("api-server"))


@pytest.fixture
def prefixed_api_server(airflow_db: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """The same server with ``[api] base_url`` ending in the path ``/airflow`` (``Server.base`` includes it);
    for one test only, so it is stopped before the module's other tests go on."""
    yield from serve(tmp_path_factory.mktemp("api-server-prefixed"), path=BASE_PATH)


def serve(work: Path, path: str = "") -> Iterator[Server]:
    """Start the api-server with ``[api] base_url`` = ``http://127.0.0.1:PORT`` + ``path``; yield; stop it."""
    port = free_port()
    base = f"http://127.0.0.1:{port}{path}"
    (work / "passwords.json").write_text(json.dumps(PASSWORDS))
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "AIRFLOW__CORE__AUTH_MANAGER": "tests.ui.deny_auth.DenyingAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "admin:admin,outsider:viewer",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(work / "passwords.json"),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        "AIRFLOW__API__BASE_URL": base,
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{base}/execution/",
    }
    log = (work / "api-server.log").open("wb")
    airflow = str(Path(sys.executable).parent / "airflow")
    process = subprocess.Popen(
        [airflow, "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
        env=env,
        cwd=work,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            assert process.poll() is None, (work / "api-server.log").read_text()[-3000:]
            try:
                with urllib.request.urlopen(base + "/api/v2/monitor/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, (work / "api-server.log").read_text()[-3000:]
            time.sleep(1)
        yield Server(base)
    finally:
        _stop(process)
        log.close()


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group, SIGKILL after 30 s; then check the group is gone."""
    pgid = process.pid  # start_new_session: the server leads its own group
    try:
        os.killpg(pgid, signal.SIGTERM)
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(pgid, signal.SIGKILL)
        process.wait(timeout=30)
    except ProcessLookupError:
        pass
    for _ in range(30):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        time.sleep(1)
    os.killpg(pgid, signal.SIGKILL)
    time.sleep(1)
    with pytest.raises(ProcessLookupError):
        os.killpg(pgid, 0)


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``FINEGRAINED_SCREENSHOTS=docs/img`` refreshes the docs' images; a temporary folder otherwise."""
    target = os.environ.get("FINEGRAINED_SCREENSHOTS")
    if target:
        path = Path(target) if Path(target).is_absolute() else REPO / target
        path.mkdir(parents=True, exist_ok=True)
        return path
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture(scope="module")
def browser(api_server: Server) -> Iterator[Any]:
    """Headless Debian Chromium through chromedriver, logged in as ``admin`` (the api-server's JWT cookie)."""
    yield from chromium(api_server)


def chromium(server: Server) -> Iterator[Any]:
    """Start Chromium logged in to ``server`` as ``admin``; yield the driver; quit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tempfile.mkdtemp(prefix='finegrained-chromium-')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        driver.set_page_load_timeout(120)
        # The login the UI does: a token from the auth manager, kept in the `_token` cookie.
        driver.get(server.base + "/api/v2/version")
        driver.add_cookie({"name": "_token", "value": server.token("admin"), "path": "/"})
        yield driver
    finally:
        driver.quit()
