"""``warm start`` prints the pool's public URL (``sc://localhost:PORT``) and where its token is; the URL with
the token, a secret, only with ``--client-url``. No Spark: the pool is a stand-in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_provider_finegrained.cli import warm as warm_cli
from airflow_provider_finegrained.cli.main import main
from airflow_provider_finegrained.warm import WarmPool

pytestmark = pytest.mark.security

TOKEN = "tok-3f9Q_secret"


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> WarmPool:
    pool = WarmPool("sc://localhost:4242", str(tmp_path), None, "local-1", None, 1.0, token=TOKEN)
    monkeypatch.setattr(warm_cli, "_settings", lambda conn_id: object())
    monkeypatch.setattr("airflow_provider_finegrained.warm.ensure_started", lambda *a, **k: pool)
    return pool


def test_warm_start_prints_the_public_url_and_the_token_file_never_the_token(
    started: WarmPool, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["warm", "start"]) == 0
    out, err = capsys.readouterr()
    assert out == "sc://localhost:4242\n"
    assert f"token:   {started.folder}/token (a client connects with sc://localhost:4242/;token=<its content>)" in err
    assert TOKEN not in out + err


def test_warm_start_prints_the_client_url_with_the_token_only_when_asked(
    started: WarmPool, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["warm", "start", "--client-url"]) == 0
    out, err = capsys.readouterr()
    assert out == f"sc://localhost:4242/;token={TOKEN}\n"
    assert TOKEN not in err


def test_warm_start_help_says_the_client_url_holds_the_token(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["warm", "start", "--help"])
    assert "token included (a secret" in " ".join(capsys.readouterr().out.split())


def test_an_older_pools_url_is_printed_as_recorded(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: Any
) -> None:
    # A pool an earlier version started, kept while regions run in it: its client URL says localhost, which answers.
    pool = WarmPool("sc://127.0.0.1:4242", str(tmp_path), None, None, None, 1.0, token=TOKEN)
    monkeypatch.setattr(warm_cli, "_settings", lambda conn_id: object())
    monkeypatch.setattr("airflow_provider_finegrained.warm.ensure_started", lambda *a, **k: pool)
    assert main(["warm", "start", "--client-url"]) == 0
    out, err = capsys.readouterr()
    assert out == f"sc://localhost:4242/;token={TOKEN}\n"
    assert "(a client connects with sc://localhost:4242/;token=<its content>)" in err
