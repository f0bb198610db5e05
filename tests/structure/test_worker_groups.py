"""The suite's two workers (scripts/test.sh, tests/worker_groups.py): tests sharing a cluster, a pool or a
module's fixture run in one worker, each worker has its own Airflow home, and the clusters' groups go first."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

import pytest

from tests.conftest import _SUITE_HOME_ENV as SUITE_HOME_ENV
from tests.conftest import REPO
from tests.worker_groups import GROUPS_ENV, SHARED_BY_GROUP, rank

FORM = "tests/hooks/test_connection_form.py"
"""A fast module with eight tests on a module-scoped fixture and sixty-one without."""


def pytest_run(*args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        # Not the outer run's worker variables: this pytest is a run of its own.
        env={**{k: v for k, v in os.environ.items() if not k.startswith("PYTEST_XDIST")}, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done.stdout


def test_each_test_gets_the_group_of_what_it_shares(tmp_path: Path) -> None:
    files = ["tests/storage/test_probe.py", "tests/e2e/test_warm.py", FORM, "tests/cluster/test_cluster_mode.py"]
    pytest_run("--collect-only", "-q", *files, env={GROUPS_ENV: str(tmp_path)})
    groups = json.loads((tmp_path / "main.json").read_text())["groups"]
    by_group: dict[str, set[str]] = defaultdict(set)
    for nodeid, group in groups.items():
        by_group[group].add(nodeid.split("::")[0])
    assert by_group == {
        # The hdfs:// case asks for the cluster by name at run time: its `hadoop` mark puts it with the cluster.
        "hadoop_cluster": {"tests/storage/test_probe.py"},
        "_embedded_warm_pool": {"tests/e2e/test_warm.py"},
        "standalone_cluster": {"tests/cluster/test_cluster_mode.py"},
        FORM: {FORM},
    }
    assert "tests/storage/test_probe.py::test_probe_writes_reads_and_deletes[hdfs]" in groups
    assert "tests/storage/test_probe.py::test_probe_writes_reads_and_deletes[local]" not in groups
    assert sum(group == FORM for group in groups.values()) == 8


def test_two_workers_keep_a_group_together_and_their_airflow_homes_apart(tmp_path: Path) -> None:
    folder = tmp_path / "groups"
    folder.mkdir()
    out = pytest_run("-n", "2", "--dist", "loadgroup", "-v", FORM, env={GROUPS_ENV: str(folder)})
    ran = {nodeid: worker for worker, nodeid in re.findall(r"^\[(gw\d)\] \[\s*\d+%\] PASSED (.+?) *$", out, flags=re.M)}
    assert len(ran) == 69
    # The module-scoped fixture's eight tests in one worker; the other tests in both.
    grouped = json.loads((folder / "gw0.json").read_text())["groups"]
    assert len(grouped) == 8
    assert len({ran[nodeid] for nodeid in grouped}) == 1
    assert set(ran.values()) == {"gw0", "gw1"}
    homes = [json.loads((folder / f"{worker}.json").read_text())["airflow_home"] for worker in ("gw0", "gw1")]
    assert len(set(homes)) == 2 and os.environ["AIRFLOW_HOME"] not in homes


def test_the_clusters_groups_are_handed_out_first() -> None:
    scopes = ["tests/a.py::t", "_embedded_warm_pool", "tests/b.py", "standalone_cluster", "hadoop_cluster"]
    assert sorted(scopes, key=rank) == [*SHARED_BY_GROUP, "tests/a.py::t", "tests/b.py"]


@pytest.mark.parametrize(
    ("suite_home", "keeps"),
    [
        ("/tmp/controller-home", True),  # a process a worker's test started: the worker's home, kept
        ("/tmp/worker-home", False),  # a worker started by the controller: a home of its own
    ],
)
def test_a_worker_takes_a_home_of_its_own_and_its_children_keep_it(suite_home: str, keeps: bool) -> None:
    env = {**os.environ, "PYTEST_XDIST_WORKER": "gw0", "AIRFLOW_HOME": "/tmp/worker-home", SUITE_HOME_ENV: suite_home}
    code = "import os, tests.conftest; print(os.environ['AIRFLOW_HOME'])"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    home = done.stdout.strip().splitlines()[-1]
    assert (home == "/tmp/worker-home") is keeps, home
    assert keeps or home.startswith(tempfile.gettempdir()), home
