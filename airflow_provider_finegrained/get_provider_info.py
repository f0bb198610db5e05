"""Provider metadata read by Airflow's provider manager (``apache_airflow_provider`` entry point)."""

from __future__ import annotations

from typing import Any

from airflow_provider_finegrained import __version__


def get_provider_info() -> dict[str, Any]:
    # ``package-name`` must equal the distribution name or every Airflow CLI command fails.
    return {
        "package-name": "airflow-provider-finegrained",
        "name": "Fine-grained Spark",
        "description": (
            "Pipelined regions, adaptive per-stage parallelism and fine-grained resources for DAGs of PySpark stages."
        ),
        "versions": [__version__],
    }
