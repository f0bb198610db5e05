"""FLIP-53's all_sources_in_one_region declared in a DAG file: the run and the ``plan`` CLI agree.

Real Airflow (``dag.test()``) and real local Spark: two source stages declared into one region run in
one Spark application led by the first; the CLI's plan of the same file shows the same regions.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from airflow_provider_finegrained.cli.main import main
from airflow_provider_finegrained.cli.report import stage_results
from airflow_provider_finegrained.contract import REGION_KEY
from tests.e2e.conftest import load_dag, run_xcoms, write_dag_file

pytestmark = pytest.mark.slow

DAG_FILE = """
import pendulum
from airflow.sdk import DAG, task

from airflow_provider_finegrained.dags.declaration import all_sources_in_one_region


@task.spark_stage
def evens(spark):
    return spark.range(0, 1000, 2).withColumnRenamed("id", "n")


@task.spark_stage
def odds(spark):
    return spark.range(1, 1000, 2).withColumnRenamed("id", "n")


@task.spark_stage
def merged(spark, evens, odds):
    return evens.unionByName(odds)


with DAG("all_sources_one_region", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")) as dag:
    all_sources_in_one_region(dag)
    merged(evens=evens(), odds=odds())
"""


def test_declared_all_sources_region_runs_as_one_application_and_matches_the_cli(
    airflow_db: None, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write_dag_file("all_sources_one_region.py", DAG_FILE)

    assert main(["plan", str(path), "--json"]) == 0
    cli_regions = json.loads(capsys.readouterr().out)["all_sources_one_region"]["regions"]
    assert [(r["name"], r["stages"]) for r in cli_regions] == [
        ("region-1", ["evens", "odds"]),
        ("region-2", ["merged"]),
    ]
    # The flag still overrides the declaration, to see the plan the other way.
    assert main(["plan", str(path), "--json", "--no-all-sources-in-one-region"]) == 0
    apart = json.loads(capsys.readouterr().out)["all_sources_one_region"]["regions"]
    assert [r["stages"] for r in apart] == [["evens"], ["odds"], ["merged"]]

    run = load_dag(path, "all_sources_one_region").test()
    assert run.state == "success", [(ti.task_id, ti.state) for ti in run.get_task_instances()]
    _, results = stage_results("all_sources_one_region", run.run_id)
    evens, odds, merged = results["evens"]["trace"], results["odds"]["trace"], results["merged"]["trace"]
    # Both sources ran in region-1, led by 'evens', in ONE Spark application; 'merged' in its own.
    assert (evens["region"], odds["region"], merged["region"]) == ("region-1", "region-1", "region-2")
    assert evens["region_leader"] == odds["region_leader"] == "evens"
    assert evens["application_id"] and evens["application_id"] == odds["application_id"]
    assert merged["application_id"] != evens["application_id"]
    # The leader's region XCom lists both sources; the plan every stage pushed is the CLI's plan.
    regions = run_xcoms("all_sources_one_region", run.run_id, REGION_KEY)
    assert set(regions) == {"evens", "merged"}
    assert (regions["evens"]["region"], regions["evens"]["stages"]) == ("region-1", ["evens", "odds"])
    assert results["merged"]["plan"]["regions"] == cli_regions
    # The data went through: 500 evens and 500 odds committed and merged.
    table = pq.read_table(results["merged"]["output"]["path"])
    assert sorted(table.column("n").to_pylist()) == list(range(1000))
