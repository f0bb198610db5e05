"""The installed package as users meet it: Airflow's provider discovery, the plan CLI, example DAGs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from airflow_provider_finegrained.get_provider_info import get_provider_info
from tests.conftest import REPO

# Each case starts a Python with Airflow (about 8 s): run apart from the unit tests with -m slow.
pytestmark = [pytest.mark.slow, pytest.mark.airflow]

EXAMPLE = REPO / "dags_examples" / "tpch_plan.py"


def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=check, env=os.environ.copy(), timeout=300)


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run(sys.executable, "-m", "airflow_provider_finegrained", *args, check=check)


def test_provider_info_names_the_distribution() -> None:
    assert get_provider_info()["package-name"] == "airflow-provider-finegrained"


def test_airflow_providers_list_shows_the_provider() -> None:
    airflow = str(Path(sys.executable).parent / "airflow")
    out = run(airflow, "providers", "list", "--output", "json").stdout
    providers = {p["package_name"]: p for p in json.loads(out[out.index("[") :])}
    assert "airflow-provider-finegrained" in providers
    assert providers["airflow-provider-finegrained"]["version"] == "0.1.0"


@pytest.mark.parametrize(
    ("listing", "expected"),
    [
        ("hooks", ["airflow_provider_finegrained.hooks.finegrained_spark.FineGrainedSparkHook"]),
        (
            "triggers",
            [
                "airflow_provider_finegrained.triggers.capacity",
                "airflow_provider_finegrained.triggers.region_application",
            ],
        ),
        ("links", ["airflow_provider_finegrained.operators.links.SparkUILink"]),
    ],
)
def test_airflow_lists_the_providers_hooks_triggers_and_links(listing: str, expected: list[str]) -> None:
    airflow = str(Path(sys.executable).parent / "airflow")
    out = run(airflow, "providers", listing, "--output", "json").stdout
    found = json.dumps(json.loads(out[out.index("[") :]))
    for name in expected:
        assert name in found


def test_provider_info_lists_operators_and_the_plugin_as_airflows_providers_do() -> None:
    import importlib

    info = get_provider_info()
    for group in info["operators"] + info["hooks"]:
        for module in group["python-modules"]:
            importlib.import_module(module)
    (plugin,) = info["plugins"]
    module, _, name = plugin["plugin-class"].rpartition(".")
    assert getattr(importlib.import_module(module), name).name == plugin["name"]


def test_example_dags_import_without_errors() -> None:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(REPO / "dags_examples"), safe_mode=False)
    assert not bag.import_errors
    assert "tpch_plan" in bag.dags


def test_plan_cli_table() -> None:
    out = cli("plan", str(EXAMPLE)).stdout
    assert out.startswith("DAG tpch_plan: 11 stages, 8 pipelined regions, 8 forward groups")
    rows = {line.split()[0]: line.split() for line in out.splitlines()[3:14]}
    assert rows["scan_lineitem"][1:4] == ["region-1", "region-1", "#1"]
    assert rows["filter_shipped"][1] == "region-1"
    assert "0.500" in rows["scan_lineitem"]
    assert "1.000" in rows["q1_pricing_summary"]
    assert "scan_nation_region -> q5_join (nation_region): blocking, broadcast" in out


def test_plan_cli_json_is_clean_on_stdout() -> None:
    data = json.loads(cli("plan", str(EXAMPLE), "--json").stdout)
    plan = data["tpch_plan"]
    assert plan["regions"][0]["stages"] == ["scan_lineitem", "filter_shipped"]
    assert plan["stages"]["q5_local_supplier_volume"]["max_parallelism"] == 8
    assert plan["stages"]["scan_nation_region"]["fixed_parallelism"] == 1


def test_plan_cli_dot_and_all_sources_option() -> None:
    dot = cli("plan", str(EXAMPLE), "--dot", "--all-sources-in-one-region").stdout
    assert dot.startswith('digraph "tpch_plan" {')
    # The five scans share one region; blocking edges from it to the joins stay dashed.
    assert dot.count("subgraph cluster_") < 8
    assert '"scan_orders" -> "q3_join" [style=dashed' in dot


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["plan", "/nonexistent/dag.py"], "does not exist"),
        (["plan", str(EXAMPLE), "--dag-id", "nope"], "no DAG 'nope' with stages"),
    ],
)
def test_plan_cli_errors(args: list[str], message: str) -> None:
    result = cli(*args, check=False)
    assert result.returncode != 0
    assert message in result.stderr


def test_plan_cli_reports_broken_dag_with_stage_names(tmp_path: Path) -> None:
    path = tmp_path / "broken.py"
    path.write_text(
        "import pendulum\nfrom airflow.sdk import DAG\n"
        "from airflow_provider_finegrained.operators.declared_stage import DeclaredStageOperator as Stage\n"
        "with DAG('broken', schedule=None, start_date=pendulum.datetime(2026, 1, 1)):\n"
        "    a = Stage(task_id='a', resources={'cpu_cores': 1, 'heap_memory': '1g'})\n"
        "    Stage(task_id='b', inputs={'x': a})\n"
    )
    result = cli("plan", str(path), check=False)
    assert result.returncode == 1
    assert "stage 'a' declares a ResourceSpec but stage 'b' does not" in result.stderr
