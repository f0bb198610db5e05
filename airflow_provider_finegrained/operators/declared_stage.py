"""A stage that declares its data flow and resources but runs no Spark code."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from airflow.providers.standard.operators.empty import EmptyOperator

from airflow_provider_finegrained.dags.declaration import StageDeclarationMixin
from airflow_provider_finegrained.planning import ResourceSpec


class DeclaredStageOperator(StageDeclarationMixin, EmptyOperator):
    """Declare a stage's inputs, resources and parallelism bounds, and run nothing.

    Use it to lay out and plan a DAG (``python -m airflow_provider_finegrained plan``) before its
    stage code exists; it accepts the same declaration arguments as the Spark stage operator.
    """

    def __init__(
        self,
        *,
        inputs: Mapping[str, Any] | None = None,
        resources: ResourceSpec | Mapping[str, Any] | None = None,
        parallelism: int | None = None,
        min_parallelism: int | None = None,
        max_parallelism: int | None = None,
        slot_sharing_group: str | None = None,
        memory_weight: float = 1.0,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.declare_stage(
            inputs=inputs,
            resources=resources,
            parallelism=parallelism,
            min_parallelism=min_parallelism,
            max_parallelism=max_parallelism,
            slot_sharing_group=slot_sharing_group,
            memory_weight=memory_weight,
        )
