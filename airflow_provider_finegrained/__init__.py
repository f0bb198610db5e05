"""Flink-style fine-grained resources and adaptive batch parallelism for Airflow DAGs of PySpark stages."""

__version__ = "0.1.0"
