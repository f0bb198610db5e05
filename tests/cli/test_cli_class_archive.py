"""``finegrained class-archive``: where the archive is and whether it is made; making it, or saying why not."""

from __future__ import annotations

from pathlib import Path

import pytest

from airflow_provider_finegrained.cli.main import main
from airflow_provider_finegrained.spark.class_archive import CACHE_ENV, archive_path
from tests.spark.test_class_archive import spark_install


def test_show_says_where_and_whether(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    home = str(spark_install(tmp_path / "spark", exit_code=2))
    assert main(["class-archive", "--show", "--spark-home", home]) == 0
    assert capsys.readouterr().out.strip() == f"{archive_path(home)} (not made)"
    assert main(["class-archive", "--spark-home", home]) == 1
    assert "could not make the class-data archive" in capsys.readouterr().err
    assert main(["class-archive", "--show", "--spark-home", home]) == 0
    assert capsys.readouterr().out.strip() == f"{archive_path(home)} (failed)"


def test_the_suites_archive_is_made(capsys: pytest.CaptureFixture[str]) -> None:
    # scripts/test.sh makes it before the tests (python -m tests.jvm_start); making it again finds it.
    assert main(["class-archive"]) == 0
    made = Path(capsys.readouterr().out.strip())
    assert made == archive_path() and made.stat().st_size > 10 * 2**20
    assert main(["class-archive", "--show"]) == 0
    assert capsys.readouterr().out.strip() == f"{made} (made)"
