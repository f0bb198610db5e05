"""The import contracts of pyproject.toml's ``[tool.importlinter]`` (run by ``lint-imports`` in scripts/test.sh) hold
on the tree and fail on a planted violation in a copy of it (the package and bench/), naming the broken contract."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = "airflow_provider_finegrained"
ROOTS = (PACKAGE, "bench")
"""The root packages the contracts read (``root_packages``): a copy of the tree holds both."""
LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")

PLANNING = "The planning core imports no Airflow, no Spark and no Airflow-side package of the provider"
DRIVER = "The driver side (runtime/, the warm pool's region driver) never imports the Airflow side"
ACYCLIC = "No import cycles between the provider's packages and modules"
BENCH = "The benchmarks (bench/, the simulator too) import only the provider's public modules"


def lint_imports(root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the project's configuration on the package found under ``root``."""
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "400", "NO_COLOR": "1"}
    return subprocess.run(
        [LINT_IMPORTS, str(REPO / "pyproject.toml"), "--no-cache"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_the_contracts_hold_on_the_tree() -> None:
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    for name in (PLANNING, DRIVER, ACYCLIC, BENCH):
        assert f"{name} KEPT" in result.stdout


@pytest.mark.parametrize(
    ("module", "planted", "contract"),
    [
        (f"{PACKAGE}/planning/units.py", "import airflow", PLANNING),
        (f"{PACKAGE}/planning/sizing.py", "import pyspark", PLANNING),
        (f"{PACKAGE}/planning/plan.py", "from airflow_provider_finegrained.hooks import finegrained_spark", PLANNING),
        (f"{PACKAGE}/runtime/job.py", "from airflow_provider_finegrained.operators import spark_stage", DRIVER),
        (f"{PACKAGE}/runtime/api.py", "from airflow.sdk import BaseHook", DRIVER),
        # progress imports planning.units: the other way round closes a cycle between the two packages.
        (f"{PACKAGE}/planning/units.py", "from airflow_provider_finegrained.runtime import progress", ACYCLIC),
        # The warm pool's processes by a private module, as the harness once found them.
        ("bench/lib/provider.py", "from airflow_provider_finegrained.warm.state import pool_processes", BENCH),
        ("bench/simulate/sim.py", "import airflow_provider_finegrained.spark.submit", BENCH),
    ],
)
def test_a_planted_violation_breaks_its_contract(tmp_path: Path, module: str, planted: str, contract: str) -> None:
    for root in ROOTS:
        shutil.copytree(REPO / root, tmp_path / root, ignore=shutil.ignore_patterns("__pycache__", "results"))
    target = tmp_path / module
    target.write_text(target.read_text() + f"\n{planted}  # planted by tests/structure/test_contracts.py\n")

    result = lint_imports(tmp_path)

    assert result.returncode != 0, result.stdout
    assert f"{contract} BROKEN" in result.stdout, result.stdout
    assert f".{Path(module).parent.name}" in result.stdout  # the report names the planting package
