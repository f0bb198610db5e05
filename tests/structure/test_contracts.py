"""The import contracts of pyproject.toml's ``[tool.importlinter]`` (run by ``lint-imports`` in scripts/test.sh) hold
on the tree and fail on a planted violation, naming the broken contract."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

PACKAGE = "airflow_provider_finegrained"
LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")

PLANNING = "The planning core imports no Airflow, no Spark and no Airflow-side package of the provider"
DRIVER = "The driver side (runtime/, the warm pool's region driver) never imports the Airflow side"
ACYCLIC = "No import cycles between the provider's packages and modules"


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
    for name in (PLANNING, DRIVER, ACYCLIC):
        assert f"{name} KEPT" in result.stdout


@pytest.mark.parametrize(
    ("module", "planted", "contract"),
    [
        ("planning/units.py", "import airflow", PLANNING),
        ("planning/sizing.py", "import pyspark", PLANNING),
        ("planning/plan.py", "from airflow_provider_finegrained.hooks import finegrained_spark", PLANNING),
        ("runtime/job.py", "from airflow_provider_finegrained.operators import spark_stage", DRIVER),
        ("runtime/api.py", "from airflow.sdk import BaseHook", DRIVER),
        # progress imports planning.units: the other way round closes a cycle between the two packages.
        ("planning/units.py", "from airflow_provider_finegrained.runtime import progress", ACYCLIC),
    ],
)
def test_a_planted_violation_breaks_its_contract(tmp_path: Path, module: str, planted: str, contract: str) -> None:
    shutil.copytree(REPO / PACKAGE, tmp_path / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / PACKAGE / module
    target.write_text(target.read_text() + f"\n{planted}  # planted by tests/structure/test_contracts.py\n")

    result = lint_imports(tmp_path)

    assert result.returncode != 0, result.stdout
    assert f"{contract} BROKEN" in result.stdout, result.stdout
    assert f".{Path(module).parent.name}" in result.stdout  # the report names the planting package
