"""A stage that declares its data flow and resources but runs no Spark code."""

from __future__ import annotations

from typing import Any

from airflow.providers.standard.operators.empty import EmptyOperator

from airflow_provider_finegrained.dags.declaration import StageDeclarationMixin, pop_declaration


class DeclaredStageOperator(StageDeclarationMixin, EmptyOperator):
    """Declare a stage's inputs, resources and parallelism bounds, and run nothing.

    Use it to lay out and plan a DAG (``python -m airflow_provider_finegrained plan``) before its
    stage code exists. It takes the declaration arguments of ``SparkStageOperator`` (``inputs``,
    ``resources``, ``parallelism``, ``min_parallelism``, ``max_parallelism``, ``slot_sharing_group``,
    ``memory_weight``) and any ``BaseOperator`` argument.
    """

    def __init__(self, **kwargs: Any) -> None:
        declaration = pop_declaration(kwargs)
        super().__init__(**kwargs)
        self.declare_stage(**declaration)
