"""Run-time decisions for a region: from a DAG plan and measured upstream sizes to a region job."""

from airflow_provider_finegrained.execution.measure import measure_external

__all__ = ["measure_external"]
