"""Reading Airflow DAGs into the planning graph."""

from airflow_provider_finegrained.dags.reader import read_dag

__all__ = ["read_dag"]
