"""Cluster policy (``airflow.policy`` entry point): validate stage DAGs when Airflow parses them.

A broken stage declaration then shows as a DAG import error naming the stages, instead of failing
at run time. Loaded while ``airflow`` itself initializes, so everything else is imported lazily.
"""

from __future__ import annotations

from typing import Any

from airflow.policies import hookimpl


@hookimpl
def dag_policy(dag: Any) -> None:
    from airflow_provider_finegrained.dags.reader import has_stages, read_dag
    from airflow_provider_finegrained.planning import StageGraphError

    if not has_stages(dag):
        return
    try:
        read_dag(dag)
    except StageGraphError as exc:
        from airflow.exceptions import AirflowClusterPolicyViolation

        raise AirflowClusterPolicyViolation(f"DAG {dag.dag_id!r}: {exc}") from exc
