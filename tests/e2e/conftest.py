"""End-to-end fixtures: a migrated SQLite Airflow database and DAG files in the DAGs folder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import DAGS_FOLDER, REPO


@pytest.fixture(scope="session")
def storage_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The embedded default's storage root lives under AIRFLOW_HOME; tests read outputs from it."""
    return Path(os.environ["AIRFLOW_HOME"]) / "finegrained" / "storage"


def install_dag_file(source: Path | str, name: str | None = None) -> Path:
    """Copy an example DAG (and its helper modules) into the DAGs folder."""
    source = Path(source)
    target = DAGS_FOLDER / (name or source.name)
    shutil.copy(source, target)
    return target


def write_dag_file(name: str, text: str) -> Path:
    path = DAGS_FOLDER / name
    path.write_text(text)
    return path


def load_dag(path: Path, dag_id: str) -> Any:
    from airflow.dag_processing.dagbag import DagBag

    bag = DagBag(dag_folder=str(path), safe_mode=False)
    assert not bag.import_errors, bag.import_errors
    return bag.dags[dag_id]


def _install_examples() -> Path:
    for name in ("hello_stages.py", "tpch_pipeline.py", "tpch_queries.py", "tpch_data.py"):
        install_dag_file(REPO / "dags_examples" / name)
    return DAGS_FOLDER


@pytest.fixture
def examples(airflow_db: None) -> Iterator[Path]:
    yield _install_examples()


@pytest.fixture(scope="module")
def examples_module(airflow_db: None) -> Path:
    return _install_examples()


def start_task_test(dag_id: str, task_id: str, log: Path) -> subprocess.Popen[bytes]:
    """``airflow tasks test DAG TASK`` in the background, its output going to ``log``."""
    airflow = str(Path(sys.executable).parent / "airflow")
    with log.open("w") as out:
        return subprocess.Popen(
            [airflow, "tasks", "test", dag_id, task_id], stdout=out, stderr=subprocess.STDOUT, env=os.environ.copy()
        )


def run_xcoms(dag_id: str, run_id: str, key: str) -> dict[str, Any]:
    """Every task's XCom value under ``key`` in one DAG run, by task id."""
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        rows: list[Any] = list(session.scalars(XComModel.get_many(run_id=run_id, dag_ids=dag_id, key=key)))
        return {row.task_id: XComModel.deserialize_value(row) for row in rows}
