"""A pool started with secrets named as Airflow names them (issue #34): none on its processes' command lines,
its Spark UI listening on this host only and showing them redacted (one real local Spark Connect server)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest

from airflow_provider_finegrained.launchers.http import get_json
from airflow_provider_finegrained.secrets import REDACTION_REGEX_CONF
from airflow_provider_finegrained.warm import WarmPool, ensure_started, status, stop
from tests.security.test_secrets import AIRFLOW_NAMED_SECRETS
from tests.warm.conftest import server_jvms, small_settings

pytestmark = [pytest.mark.slow, pytest.mark.security, pytest.mark.spark]


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WarmPool]:
    root = tmp_path_factory.mktemp("warm-secret-names")
    folder = str(root / "pool")
    started = ensure_started(small_settings(root, spark_conf=AIRFLOW_NAMED_SECRETS), folder, idle_timeout_s=0)
    try:
        yield started
    finally:
        stop(folder)
        assert server_jvms(folder) == []


def test_no_airflow_named_secret_on_the_pools_command_lines(pool: WarmPool) -> None:
    assert pool.folder is not None
    info = status(pool.folder)
    assert info is not None
    for pid in (info["server_pid"], info["supervisor_pid"]):
        line = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
        assert not [value for value in AIRFLOW_NAMED_SECRETS.values() if value in line], pid
        assert not [key for key in AIRFLOW_NAMED_SECRETS if key in line], pid


def test_the_pools_ui_is_on_loopback_and_redacts_them(pool: WarmPool) -> None:
    assert pool.folder is not None and pool.ui_url and pool.application_id
    info = status(pool.folder)
    assert info is not None
    ui_port = urlsplit(pool.ui_url).port
    listening = [
        c.laddr
        for c in psutil.Process(info["server_pid"]).net_connections(kind="inet")
        if c.status == psutil.CONN_LISTEN
    ]
    assert any(addr.port == ui_port for addr in listening), listening
    # The UI, the gRPC port, the driver's RPC and block manager: none reachable from another host.
    assert all(addr.ip in ("127.0.0.1", "::1", "::ffff:127.0.0.1") for addr in listening), listening
    environment = get_json(f"{pool.ui_url}/api/v1/applications/{pool.application_id}/environment")
    shown = dict(environment["sparkProperties"])
    assert shown[REDACTION_REGEX_CONF]
    for key, value in AIRFLOW_NAMED_SECRETS.items():
        assert key in shown and "redacted" in shown[key], key  # it reached the server
        assert value not in str(environment)
