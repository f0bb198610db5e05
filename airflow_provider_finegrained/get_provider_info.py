"""Provider metadata read by Airflow's provider manager (``apache_airflow_provider`` entry point)."""

from __future__ import annotations

from typing import Any

from airflow_provider_finegrained import __version__
from airflow_provider_finegrained.settings.form import config_section, connection_types


def get_provider_info() -> dict[str, Any]:
    # ``package-name`` must equal the distribution name or every Airflow CLI command fails.
    return {
        "package-name": "airflow-provider-finegrained",
        "name": "Fine-grained Spark",
        "description": (
            "Pipelined regions, adaptive per-stage parallelism and fine-grained resources for DAGs of PySpark stages."
        ),
        "versions": [__version__],
        "connection-types": connection_types(),
        "config": config_section(),
        "integrations": [{"integration-name": "Fine-grained Spark", "tags": ["software"]}],
        # Deferred tasks wait in these triggers: capacity to free, a cluster-mode region application to end.
        "triggers": [
            {
                "integration-name": "Fine-grained Spark",
                "python-modules": [
                    "airflow_provider_finegrained.triggers.capacity",
                    "airflow_provider_finegrained.triggers.region_application",
                ],
            }
        ],
        "hooks": [
            {
                "integration-name": "Fine-grained Spark",
                "python-modules": ["airflow_provider_finegrained.hooks.finegrained_spark"],
            }
        ],
        "operators": [
            {
                "integration-name": "Fine-grained Spark",
                "python-modules": [
                    "airflow_provider_finegrained.operators.spark_stage",
                    "airflow_provider_finegrained.operators.warm_pool",
                    "airflow_provider_finegrained.operators.declared_stage",
                ],
            }
        ],
        "extra-links": ["airflow_provider_finegrained.operators.links.SparkUILink"],
        # Also registered through the airflow.plugins entry point (lazy discovery reads only that); Airflow
        # registers a plugin name once.
        "plugins": [
            {"name": "finegrained", "plugin-class": "airflow_provider_finegrained.ui.plugin.FineGrainedPlugin"}
        ],
        # `airflow finegrained ...`: the same commands as `python -m airflow_provider_finegrained ...`.
        "cli": ["airflow_provider_finegrained.cli.airflow_commands.get_cli_commands"],
        "task-decorators": [
            {
                "name": "spark_stage",
                "class-name": "airflow_provider_finegrained.decorators.spark_stage.spark_stage_task",
            }
        ],
    }
