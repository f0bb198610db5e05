"""Each launcher module imports on its own (no cycles) and pulls in neither Airflow nor pyspark."""

from __future__ import annotations

import subprocess
import sys

import pytest

MODULES = [
    "base",
    "master",
    "http",
    "links",
    "submitting",
    "local",
    "standalone",
    "standalone.client",
    "standalone.capacity",
    "yarn",
    "yarn.applications",
    "yarn.capacity",
    "kubernetes",
    "warm",
    "select",
    "remote",
]


@pytest.mark.parametrize("module", MODULES)
def test_module_imports_alone_without_airflow_or_pyspark(module: str) -> None:
    code = (
        f"import sys, airflow_provider_finegrained.launchers.{module}; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'airflow', 'pyspark'}))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_region_run_modules_import_alone() -> None:
    modules = [
        "execution.region_trace",
        "execution.region_folder",
        "execution.region_job",
        "execution.capacity_gate",
        "execution.region_sequence",
    ]
    for module in modules:
        done = subprocess.run(
            [sys.executable, "-c", f"import airflow_provider_finegrained.{module}"],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, f"{module}: {done.stderr}"
