"""Test-wide setup: an isolated AIRFLOW_HOME so tests never touch a user's Airflow."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# Set before anything imports airflow: its configuration is read at import time.
_HOME = Path(tempfile.mkdtemp(prefix="finegrained-airflow-home-"))
os.environ.setdefault("AIRFLOW_HOME", str(_HOME))
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# dag.test() syncs the DAGs folder (the default bundle) to the database: tests put their DAG files here.
DAGS_FOLDER = _HOME / "dags"
DAGS_FOLDER.mkdir()
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(DAGS_FOLDER))
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "False")

REPO = Path(__file__).resolve().parent.parent
