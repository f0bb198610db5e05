from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from airflow_provider_finegrained.spark.java import (
    JavaNotFoundError,
    JavaVersionError,
    SparkEnvironmentError,
    check_java,
    parse_java_version,
)


@pytest.mark.parametrize(
    ("output", "version", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime Environment', "17.0.15", 17),
        ('java version "1.8.0_392"\nJava(TM) SE Runtime Environment', "1.8.0_392", 8),
        ('openjdk version "21" 2023-09-19', "21", 21),
        ('openjdk version "11.0.2-ea" 2019-01-15', "11.0.2-ea", 11),
        ('Picked up JAVA_TOOL_OPTIONS: -Xss4m\nopenjdk version "22-ea" 2024-03-19', "22-ea", 22),
        ('java version "1.7.0_80"', "1.7.0_80", 7),
    ],
)
def test_parse_java_version(output: str, version: str, major: int) -> None:
    assert parse_java_version(output) == (version, major)


def test_parse_java_version_without_version() -> None:
    with pytest.raises(ValueError, match="no version"):
        parse_java_version("Error: could not find libjava.so")


def _fake_java_home(tmp_path: Path, stderr_line: str, exit_code: int = 0) -> Path:
    home = tmp_path / "fake-jdk"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho '{stderr_line}' >&2\nexit {exit_code}\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return home


@pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("JAVA_HOME"), reason="no java")
def test_real_java_is_17_or_newer() -> None:
    info = check_java()
    assert info.major >= 17
    assert os.path.isfile(info.executable)
    assert info.version.startswith(str(info.major))


def test_old_java_in_java_home_is_rejected_with_install_hint(tmp_path: Path) -> None:
    home = _fake_java_home(tmp_path, 'java version "1.8.0_392"')
    with pytest.raises(JavaVersionError) as caught:
        check_java(java_home=str(home))
    message = str(caught.value)
    assert "Java 8" in message
    assert "1.8.0_392" in message
    assert "apt-get install openjdk-17-jre-headless" in message
    assert "JAVA_HOME" in message
    assert isinstance(caught.value, SparkEnvironmentError)
    assert isinstance(caught.value, RuntimeError)


def test_java_home_is_read_from_the_given_environment(tmp_path: Path) -> None:
    home = _fake_java_home(tmp_path, 'openjdk version "11.0.21" 2023-10-17')
    with pytest.raises(JavaVersionError, match="Java 11"):
        check_java(env={"JAVA_HOME": str(home), "PATH": os.environ.get("PATH", "")})


def test_new_fake_java_passes(tmp_path: Path) -> None:
    home = _fake_java_home(tmp_path, 'openjdk version "21.0.4" 2024-07-16')
    info = check_java(java_home=str(home))
    assert (info.major, info.version, info.java_home) == (21, "21.0.4", str(home))
    assert info.executable == str(home / "bin" / "java")


def test_java_printing_no_version(tmp_path: Path) -> None:
    home = _fake_java_home(tmp_path, "Error occurred during initialization of VM", exit_code=1)
    with pytest.raises(JavaVersionError, match="exited with 1 and printed no version"):
        check_java(java_home=str(home))


def test_java_home_without_java(tmp_path: Path) -> None:
    with pytest.raises(JavaNotFoundError, match="has no executable bin/java") as caught:
        check_java(java_home=str(tmp_path))
    assert "openjdk-17-jre-headless" in str(caught.value)


def test_no_java_on_path(tmp_path: Path) -> None:
    with pytest.raises(JavaNotFoundError, match="no java on PATH") as caught:
        check_java(env={"PATH": str(tmp_path)})
    assert "openjdk-17-jre-headless" in str(caught.value)


def test_java_found_on_path(tmp_path: Path) -> None:
    home = _fake_java_home(tmp_path, 'openjdk version "17.0.15" 2025-04-15')
    info = check_java(env={"PATH": f"{tmp_path}:{home / 'bin'}"})
    assert info.executable == str(home / "bin" / "java")
    assert info.java_home is None
    assert info.major == 17
