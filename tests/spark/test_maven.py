"""Resolving jars with mvn, without the network: a fake ``mvn`` on PATH records the command it was given."""

from __future__ import annotations

import json
import os
import stat
import sys
from pathlib import Path

import pytest

from airflow_provider_finegrained.spark.hadoop_cluster import HadoopClusterError, resolve_classpath
from airflow_provider_finegrained.spark.maven import MavenError, resolve_jars

# Records its argv, then writes the classpath named by $FAKE_MVN_CLASSPATH to -Dmdep.outputFile (or fails).
FAKE_MVN = """#!{python}
import json, os, sys
with open(os.environ["FAKE_MVN_LOG"], "a") as log:
    log.write(json.dumps(sys.argv[1:]) + "\\n")
if os.environ.get("FAKE_MVN_FAIL"):
    print("[ERROR] Could not resolve dependencies for project", file=sys.stderr)
    sys.exit(1)
out = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("-Dmdep.outputFile="))
with open(out, "w") as handle:
    handle.write(os.environ["FAKE_MVN_CLASSPATH"])
"""


@pytest.fixture
def fake_mvn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake ``mvn`` alone on PATH, a cache of the test's own; returns the file its calls are logged to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    mvn = bin_dir / "mvn"
    mvn.write_text(FAKE_MVN.format(python=sys.executable))
    mvn.chmod(mvn.stat().st_mode | stat.S_IXUSR)
    jars = [tmp_path / "m2" / "hadoop-aws-3.5.0.jar", tmp_path / "m2" / "bundle-2.35.4.jar"]
    jars[0].parent.mkdir()
    for jar in jars:
        jar.write_bytes(b"PK")
    log = tmp_path / "mvn-calls.jsonl"
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setenv("FAKE_MVN_LOG", str(log))
    monkeypatch.setenv("FAKE_MVN_CLASSPATH", os.pathsep.join(str(jar) for jar in jars))
    return log


def _calls(log: Path) -> list[list[str]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_coordinates_are_resolved_once_then_read_from_the_cache(fake_mvn: Path, tmp_path: Path) -> None:
    jars = resolve_jars(["org.apache.hadoop:hadoop-aws:3.5.0"])
    assert [os.path.basename(jar) for jar in jars] == ["hadoop-aws-3.5.0.jar", "bundle-2.35.4.jar"]
    (call,) = _calls(fake_mvn)
    pom = Path(call[call.index("-f") + 1])
    assert pom.is_relative_to(tmp_path / "cache" / "airflow-provider-finegrained" / "maven")
    assert "<artifactId>hadoop-aws</artifactId><version>3.5.0</version>" in pom.read_text()
    assert call[:3] == ["-q", "-B", "-f"] and "dependency:build-classpath" in call
    # Cache hit: mvn is not run again.
    assert resolve_jars(["org.apache.hadoop:hadoop-aws:3.5.0"]) == jars
    assert len(_calls(fake_mvn)) == 1
    # Another version is another cache entry.
    resolve_jars(["org.apache.hadoop:hadoop-aws:3.4.1"])
    assert len(_calls(fake_mvn)) == 2


def test_a_jar_gone_from_the_local_repository_is_resolved_again(fake_mvn: Path, tmp_path: Path) -> None:
    jars = resolve_jars(["org.apache.hadoop:hadoop-aws:3.5.0"])
    os.remove(jars[1])
    with pytest.raises(MavenError, match="names no jar that exists"):
        resolve_jars(["org.apache.hadoop:hadoop-aws:3.5.0"])  # mvn ran, but the fake brings nothing back
    assert len(_calls(fake_mvn)) == 2


def test_without_mvn_the_error_says_how_to_install_it(fake_mvn: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(fake_mvn.parent / "nothing-here"))
    with pytest.raises(
        MavenError, match=r"mvn \(Apache Maven\) is not on PATH; it fetches org.apache.hadoop:hadoop-aws"
    ):
        resolve_jars(["org.apache.hadoop:hadoop-aws:3.5.0"])


def test_a_failing_mvn_is_reported_with_its_output(fake_mvn: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_MVN_FAIL", "1")
    with pytest.raises(
        MavenError, match=r"(?s)could not resolve org.apache.hadoop:hadoop-aws:3.5.0:.*Could not resolve"
    ):
        resolve_jars(["org.apache.hadoop:hadoop-aws:3.5.0"])
    with pytest.raises(MavenError, match="is not group:artifact:version"):
        resolve_jars(["hadoop-aws"])


def test_the_minicluster_classpath_goes_through_the_same_resolver(
    fake_mvn: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    classpath = resolve_classpath("3.5.0")
    assert [os.path.basename(jar) for jar in classpath.split(os.pathsep)] == [
        "hadoop-aws-3.5.0.jar",
        "bundle-2.35.4.jar",
    ]
    (call,) = _calls(fake_mvn)
    # The packaged pom, copied beside its cached classpath (Maven's target/ goes there, never into the package).
    folder = tmp_path / "cache" / "airflow-provider-finegrained" / "hadoop" / "3.5.0"
    assert call[call.index("-f") + 1] == str(folder / "pom.xml")
    assert "hadoop-client-minicluster" in (folder / "pom.xml").read_text()
    assert "-Dhadoop.version=3.5.0" in call and f"-Dmdep.outputFile={folder / 'classpath.txt'}.tmp" in call
    assert resolve_classpath("3.5.0") == classpath and len(_calls(fake_mvn)) == 1
    monkeypatch.setenv("PATH", str(tmp_path / "nothing-here"))
    with pytest.raises(HadoopClusterError, match="not on PATH; it fetches the Hadoop minicluster's jars"):
        resolve_classpath("3.4.1")
