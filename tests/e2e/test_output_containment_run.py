"""A templated output_path is judged once rendered, in a real run (issue 34): each stage fails before Spark starts.

The rule itself: tests/storage/test_output_containment.py; literal paths at parse time:
tests/airflow/test_dag_reader.py; every rendered form against the root: tests/execution/test_region_folder.py.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from airflow_provider_finegrained.execution.region_folder import RegionFolder
from tests.e2e.conftest import load_dag, write_dag_file

pytestmark = [pytest.mark.slow, pytest.mark.security]

DAG_TEXT = """
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

def source(spark):
    return spark.range(3)

PARAMS = {{"root": ".", "reserved": "_history", "other": "t_hello", "run": "manual__1", "abs_root": "{root}"}}

with DAG("contained_run", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC"), params=PARAMS):
    Stage(task_id="root_itself", python_callable=source, output_path="{{{{ params.root }}}}")
    Stage(task_id="absolute_root", python_callable=source, output_path="{{{{ params.abs_root }}}}")
    Stage(task_id="reserved", python_callable=source, output_path="{{{{ params.reserved }}}}/t_hello/hello")
    Stage(task_id="other_dag", python_callable=source, output_path="{{{{ params.other }}}}")
    Stage(task_id="other_try", python_callable=source, output_path="t_hello/{{{{ params.run }}}}/hello/try=0")
"""

EXPECTED = {
    "root_itself": "stage 'root_itself': output_path '.' is the storage root itself; allowed:",
    "absolute_root": "stage 'absolute_root': output_path '{root}' is the storage root itself; allowed:",
    "reserved": "stage 'reserved': output_path '_history/t_hello/hello' is inside '_history', a folder the provider",
    "other_dag": "stage 'other_dag': output_path 't_hello' is inside 't_hello', a folder holding runs of another DAG",
    "other_try": "stage 'other_try': output_path 't_hello/manual__1/hello/try=0' has a folder 'try=0' named like",
}


def test_rendered_output_paths_outside_the_users_part_of_the_root_fail_the_stage(
    airflow_db: None, storage_root: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    root = str(storage_root)
    storage_root.mkdir(parents=True, exist_ok=True)
    RegionFolder(root, "t_hello", "manual__1", "region-1", 0).reset(["hello"])  # another DAG's run
    before = sorted(str(p.relative_to(storage_root)) for p in storage_root.rglob("*"))
    path = write_dag_file("contained_run.py", textwrap.dedent(DAG_TEXT.format(root=root)))
    run = load_dag(path, "contained_run").test()
    assert {ti.task_id: ti.state for ti in run.get_task_instances()} == dict.fromkeys(EXPECTED, "failed")
    text = "".join(capfd.readouterr())
    for message in EXPECTED.values():
        assert message.format(root=root) in text
    # Nothing was committed where it was refused: no marker at the root, in _history or in t_hello's folder.
    assert not (storage_root / "_COMMITTED").exists()
    assert not (storage_root / "_history" / "t_hello").exists()
    after = sorted(str(p.relative_to(storage_root)) for p in (storage_root / "t_hello").rglob("*"))
    assert after == [p for p in before if p.startswith("t_hello/")]
