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

REPO = Path(__file__).resolve().parent.parent
