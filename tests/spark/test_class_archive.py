"""The class-data archive's name and its making (``spark.class_archive``): one per Spark install and Java, a
new one when either changes, made once; a failed making is said once and not tried by every region.

That the JVMs map the archive the suite makes is tested on the cluster (tests/cluster/test_jvm_start_on_standalone.py).
"""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from airflow_provider_finegrained.spark.class_archive import (
    CACHE_ENV,
    archive_path,
    build_in_background,
    cache_folder,
    existing_archive,
    main,
)


def spark_install(root: Path, exit_code: int = 0) -> Path:
    """A Spark install of two jars whose spark-submit exits with ``exit_code`` (saying why on stderr)."""
    (root / "bin").mkdir(parents=True)
    (root / "jars").mkdir()
    for name in ("spark-core.jar", "spark-sql.jar"):
        (root / "jars" / name).write_bytes(b"PK" + name.encode())
    submit = root / "bin" / "spark-submit"
    submit.write_text(f"#!/bin/sh\necho 'no Spark here' >&2\nexit {exit_code}\n")
    submit.chmod(submit.stat().st_mode | stat.S_IEXEC)
    return root


def test_the_cache_folder_is_outside_the_repository(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert cache_folder({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "airflow-provider-finegrained/class-archive"
    assert cache_folder({CACHE_ENV: "/var/cache/jsa"}) == Path("/var/cache/jsa")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_folder({}) == tmp_path / "home/.cache/airflow-provider-finegrained/class-archive"


def test_a_new_jar_or_spark_install_gets_a_new_archive(tmp_path: Path) -> None:
    home = spark_install(tmp_path / "spark")
    first = archive_path(str(home), folder=tmp_path)
    assert first == archive_path(str(home), folder=tmp_path)  # the same install: the same name
    jar = home / "jars" / "spark-sql.jar"
    os.utime(jar, ns=(jar.stat().st_atime_ns, jar.stat().st_mtime_ns + 10**9))
    second = archive_path(str(home), folder=tmp_path)
    (home / "jars" / "hadoop-aws.jar").write_bytes(b"PK")
    third = archive_path(str(home), folder=tmp_path)
    other = archive_path(str(spark_install(tmp_path / "other")), folder=tmp_path)
    assert len({first, second, third, other}) == 4
    assert first.parent == tmp_path and first.suffix == ".jsa"


def test_a_failed_making_is_said_once_and_not_tried_again_by_every_region(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    home = str(spark_install(tmp_path / "spark", exit_code=3))
    assert main(["--spark-home", home]) == 1
    target = archive_path(home)
    failed = target.with_suffix(".failed")
    assert "no Spark here" in failed.read_text()
    assert f"could not make the class-data archive {target}" in capsys.readouterr().err
    assert not target.exists() and not list(target.parent.glob("*.partial"))  # nothing half-made is left
    assert existing_archive(home) is None
    log = target.with_suffix(".log")
    build_in_background(home)
    assert not log.exists()  # the failure stands until someone makes it by hand: no process was started
    failed.unlink()
    build_in_background(home)  # a real process of its own, which fails as spark-submit does
    deadline = time.monotonic() + 60
    while not failed.exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "no Spark here" in failed.read_text() and log.exists()
