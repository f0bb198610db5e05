"""The DAG's parse-time plan, once per DAG object in this process, and the stage tasks' deferrable default."""

from __future__ import annotations

import threading
from typing import Any

from airflow_provider_finegrained.planning import DagPlan

__all__ = ["dag_plan", "default_deferrable"]

_PLAN_CACHE: dict[int, DagPlan] = {}
_PLAN_LOCK = threading.Lock()


def default_deferrable() -> bool:
    """``[finegrained] default_deferrable``, else Airflow's ``[operators] default_deferrable``; False when unset."""
    from airflow.sdk.configuration import conf

    fallback = conf.getboolean("operators", "default_deferrable", fallback=False)
    return bool(conf.getboolean("finegrained", "default_deferrable", fallback=fallback))


def dag_plan(dag: Any) -> DagPlan:
    """The DAG's parse-time plan, computed once per DAG object in this process."""
    from airflow_provider_finegrained.dags.reader import read_dag

    with _PLAN_LOCK:
        plan = _PLAN_CACHE.get(id(dag))
        if plan is None or plan.dag_id != dag.dag_id:
            plan = _PLAN_CACHE[id(dag)] = read_dag(dag)
        return plan
