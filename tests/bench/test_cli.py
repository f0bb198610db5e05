"""``python -m bench``: one command lists every experiment, and each experiment's ``--help`` gives its options."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from bench import EXPERIMENTS
from tests.conftest import REPO

AGREED = (
    "compare",
    "substrate",
    "shared-cluster",
    "warm-start",
    "warm-start-airflow",
    "plan-scaling",
    "overhead",
    "skew",
    "history",
    "stage-sweep",
    "python-env",
    "app-start",
    "cold-start",
    "month",
    "simulate",
)
"""The experiments of the command line, as docs/benchmarks.md names them."""


def bench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run(
        [sys.executable, "-m", "bench", *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_help_names_every_experiment_with_one_line_each() -> None:
    result = bench("--help")
    assert result.returncode == 0, result.stderr
    assert tuple(EXPERIMENTS) == AGREED
    listed = [line.split()[0] for line in result.stdout.splitlines() if line.startswith("  ")]
    assert listed == list(AGREED)
    for name, experiment in EXPERIMENTS.items():
        assert f"  {name}" in result.stdout and experiment.summary in result.stdout


@pytest.mark.parametrize("name", AGREED)
def test_each_experiment_gives_its_options(name: str) -> None:
    result = bench(name, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: python -m bench {name}") or name == "simulate", result.stdout
    assert "--" in result.stdout  # its options, from its own parser


def test_an_unknown_experiment_is_refused_and_no_argument_prints_the_list() -> None:
    unknown = bench("bytes-per-task")
    assert unknown.returncode == 2 and "unknown experiment 'bytes-per-task'" in unknown.stderr
    bare = bench()
    assert bare.returncode == 2 and "compare" in bare.stderr
