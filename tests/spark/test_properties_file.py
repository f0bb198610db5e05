"""Secret settings in a private Java properties file: the split, the escaping (read back by a real JVM), the
file's permissions and life time, and spark-submit's arguments."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from airflow_provider_finegrained.spark.properties_file import (
    properties_file_args,
    properties_text,
    secret_properties_file,
    split_secret_conf,
)


@pytest.mark.parametrize(
    ("conf", "public", "secret"),
    [
        ({}, {}, {}),
        ({"spark.app.name": "a"}, {"spark.app.name": "a"}, {}),
        (
            {"spark.authenticate.secret": "s", "spark.executor.cores": "2"},
            {"spark.executor.cores": "2"},
            {"spark.authenticate.secret": "s"},
        ),
        (
            {"spark.hadoop.fs.s3a.secret.key": "k", "spark.hadoop.fs.s3a.access.key": "a", "spark.x": "1"},
            {"spark.x": "1"},
            {"spark.hadoop.fs.s3a.secret.key": "k", "spark.hadoop.fs.s3a.access.key": "a"},
        ),
        ({"spark.connect.authenticate.token": "t"}, {}, {"spark.connect.authenticate.token": "t"}),
        ({"spark.ssl.keyStorePassword": "p"}, {}, {"spark.ssl.keyStorePassword": "p"}),
    ],
)
def test_split_secret_conf(conf: dict[str, str], public: dict[str, str], secret: dict[str, str]) -> None:
    assert split_secret_conf(conf) == (public, secret)


@pytest.mark.parametrize(
    ("settings", "text"),
    [
        ({"spark.a.secret": "plain"}, "spark.a.secret=plain\n"),
        ({"spark.a.secret": r"back\slash"}, "spark.a.secret=back\\\\slash\n"),
        ({"spark.a.secret": "a=b:c#d!e"}, "spark.a.secret=a\\=b\\:c\\#d\\!e\n"),
        ({"spark.a.secret": "line1\nline2\r"}, "spark.a.secret=line1\\nline2\\r\n"),
        ({"spark.a.secret": "in side"}, "spark.a.secret=in side\n"),
        ({"spark.a.secret": "caf\u00e9\U0001f511"}, "spark.a.secret=caf\\u00e9\\ud83d\\udd11\n"),
        ({"spark.b.secret": "2", "spark.a.secret": "1"}, "spark.a.secret=1\nspark.b.secret=2\n"),
        ({"spark.a b.secret": "x"}, "spark.a\\ b.secret=x\n"),
    ],
)
def test_properties_text_escapes(settings: dict[str, str], text: str) -> None:
    assert properties_text(settings) == text


@pytest.mark.parametrize("value", [" Xq7lead", "Xq7trail ", "\tXq7tab", "Xq7nul\x00"])
@pytest.mark.security
def test_values_spark_would_trim_are_refused_naming_the_key_not_the_value(value: str) -> None:
    with pytest.raises(ValueError, match=r"spark\.a\.secret") as caught:
        properties_text({"spark.a.secret": value})
    assert value.strip() not in str(caught.value)


NASTY = {
    "spark.a.secret": "back\\slash=eq:colon #hash !bang",
    "spark.b.secret": "multi\nline\r\nvalue",
    "spark.c.secret": "=starts with equals",
    "spark.d.secret": "#starts with hash",
    "spark.e.secret": "caf\u00e9 \u4e2d\u6587 \U0001f511",
    "spark.f.secret": "ends with backslash\\",
    "spark.g.secret": "",
    "spark.h.secret": "x\ty\fz",
}

_READER = """
import java.io.*;
import java.nio.charset.StandardCharsets;
import java.util.*;
public class ReadBack {
    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        // As Spark's Utils.getPropertiesFromFile and the launcher read it.
        try (Reader r = new InputStreamReader(new FileInputStream(args[0]), StandardCharsets.UTF_8)) { p.load(r); }
        for (String k : new TreeSet<>(p.stringPropertyNames())) {
            StringBuilder hex = new StringBuilder();
            for (byte b : p.getProperty(k).getBytes(StandardCharsets.UTF_8)) hex.append(String.format("%02x", b));
            System.out.println(k + " " + hex);
        }
    }
}
"""


@pytest.mark.skipif(shutil.which("java") is None, reason="needs a JVM")
def test_nasty_values_round_trip_through_java_properties(tmp_path: Path) -> None:
    reader = tmp_path / "ReadBack.java"
    reader.write_text(_READER)
    with secret_properties_file(NASTY) as path:
        assert path is not None
        out = subprocess.run(
            ["java", str(reader), path], capture_output=True, text=True, check=True, timeout=120
        ).stdout
    pairs = (line.partition(" ") for line in out.splitlines() if line.startswith("spark."))
    read = {key: value for key, _, value in pairs}
    assert {key: bytes.fromhex(value).decode() for key, value in read.items()} == NASTY


@pytest.mark.security
def test_file_is_private_and_removed_after(tmp_path: Path) -> None:
    with secret_properties_file({"spark.authenticate.secret": "s3cr3t"}, directory=str(tmp_path)) as path:
        assert path is not None
        folder = os.path.dirname(path)
        assert os.path.dirname(folder) == str(tmp_path)
        assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert Path(path).read_text() == "spark.authenticate.secret=s3cr3t\n"
    assert not os.path.exists(folder)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.security
def test_file_is_removed_when_the_block_fails(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"), secret_properties_file({"spark.x.token": "t"}, str(tmp_path)):
        raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []


def test_no_secrets_no_file(tmp_path: Path) -> None:
    with secret_properties_file({}, directory=str(tmp_path)) as path:
        assert path is None
        assert list(tmp_path.iterdir()) == []
    assert properties_file_args(None) == []


@pytest.mark.security
def test_file_is_private_even_under_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        with secret_properties_file({"spark.x.password": "p"}, directory=str(tmp_path)) as path:
            assert path is not None
            assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
            assert stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode) == 0o700
    finally:
        os.umask(old)


def test_properties_file_args_keep_spark_defaults() -> None:
    assert properties_file_args("/tmp/x/secret.properties") == [
        "--properties-file",
        "/tmp/x/secret.properties",
        "--load-spark-defaults",
    ]


@pytest.mark.security
def test_a_folder_left_by_a_killed_process_is_removed_by_the_next_use(tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    abandoned = tmp_path / f"finegrained-conf-{dead.pid}-abcd1234"
    abandoned.mkdir(mode=0o700)
    (abandoned / "secret.properties").write_text("spark.authenticate.secret=left\n")
    living = tmp_path / f"finegrained-conf-{os.getppid()}-efgh5678"  # pytest's parent: alive
    living.mkdir(mode=0o700)
    unrelated = tmp_path / "finegrained-conf-notapid"
    unrelated.mkdir()
    with secret_properties_file({"spark.x.secret": "s"}, directory=str(tmp_path)) as path:
        assert path is not None
        assert os.path.basename(os.path.dirname(path)).startswith(f"finegrained-conf-{os.getpid()}-")
        assert not abandoned.exists()
        assert living.exists() and unrelated.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([living.name, unrelated.name])
