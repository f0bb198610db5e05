"""The suite in two pytest-xdist workers (``scripts/test.sh``: ``-n 2 --dist loadgroup``), a cluster or a pool
started once.

Tests that share an expensive fixture run in the same worker: the session's Hadoop cluster (every test marked
``hadoop``: the ``hdfs://`` cases ask for it by name at run time), its standalone cluster, the embedded warm
pool, and a module's own fixture of module scope (an api-server, a module's warm pool). The others go to
whichever worker is free.

pytest-xdist's own ``loadgroup`` reads the ``xdist_group`` mark through ``item._nodeid``, which pytest 9 no
longer reads, so its groups are lost. Here each worker writes the groups it collected to a folder the
controller named, and the controller's scheduler (a ``LoadScopeScheduling`` whose scope is the group) reads
them: the Hadoop cluster's group first, then the standalone cluster's, so the two start on different workers.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest

GROUPS_ENV = "FINEGRAINED_WORKER_GROUPS"
"""The folder where each worker writes ``<worker>.json`` (``groups``: test id -> group; its ``airflow_home``),
named by the controller."""

SHARED_BY_GROUP: tuple[str, ...] = ("hadoop_cluster", "standalone_cluster", "_embedded_warm_pool")
"""Session fixtures that start a cluster or a pool, in the order their groups are handed out."""


def group_of(item: pytest.Item, repo: Path) -> str | None:
    """A test's group: an explicit ``xdist_group`` mark, else the first shared session fixture it uses, else
    its module (repository-relative) when it uses a fixture of module scope, else none."""
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    names = getattr(item, "fixturenames", ())
    for name in SHARED_BY_GROUP:
        if name in names:
            return name
    if item.get_closest_marker("hadoop") is not None:
        return "hadoop_cluster"
    info = getattr(item, "_fixtureinfo", None)
    definitions = info.name2fixturedefs if info is not None else {}
    if any(definitions.get(name) and definitions[name][-1].scope == "module" for name in names):
        return item.path.resolve().relative_to(repo).as_posix()
    return None


def name_groups_folder(config: pytest.Config) -> None:
    """On the controller of a ``loadgroup`` run: a folder for the workers' groups (they inherit the variable),
    unless the caller named one."""
    if os.environ.get("PYTEST_XDIST_WORKER") or config.getoption("dist", "no") != "loadgroup":
        return
    if GROUPS_ENV not in os.environ:
        folder = tempfile.mkdtemp(prefix="finegrained-worker-groups-")
        os.environ[GROUPS_ENV] = folder
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


def write_groups(items: list[pytest.Item], repo: Path) -> None:
    """On a worker: its collected tests' groups, for the controller's scheduler (``main.json`` outside xdist,
    when the caller named the folder)."""
    folder, worker = os.environ.get(GROUPS_ENV), os.environ.get("PYTEST_XDIST_WORKER", "main")
    if not folder:
        return
    groups = {item.nodeid: group for item in items if (group := group_of(item, repo)) is not None}
    temporary = Path(folder) / f".{worker}.json"
    temporary.write_text(json.dumps({"groups": groups, "airflow_home": os.environ.get("AIRFLOW_HOME")}))
    temporary.replace(Path(folder) / f"{worker}.json")


def rank(scope: str) -> int:
    return SHARED_BY_GROUP.index(scope) if scope in SHARED_BY_GROUP else len(SHARED_BY_GROUP)


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """The controller's scheduler for ``--dist loadgroup``: work units are the groups the workers wrote."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):  # type: ignore[misc]
        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:
                files = sorted(Path(os.environ[GROUPS_ENV]).glob("gw*.json"))
                self._groups = json.loads(files[0].read_text())["groups"] if files else {}
            return self._groups.get(nodeid, nodeid)

        def schedule(self) -> None:
            if self.collection is not None or not self._check_nodes_have_same_collection():
                super().schedule()
                return
            # As LoadScopeScheduling.schedule, but the shared fixtures' groups first, in SHARED_BY_GROUP's order.
            self.collection = list(next(iter(self.registered_collections.values())))
            units: dict[str, dict[str, bool]] = {}
            for nodeid in self.collection:
                units.setdefault(self._split_scope(nodeid), {})[nodeid] = False
            for scope in sorted(units, key=rank):
                self.workqueue[scope] = units[scope]
            for node in self.nodes:
                if self.workqueue:
                    self._assign_work_unit(node)
            for node in self.nodes:
                self._reschedule(node)

    return GroupScheduling(config, log)
