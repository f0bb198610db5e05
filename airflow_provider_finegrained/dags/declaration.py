"""Declaring a stage on an Airflow task: inputs by upstream task, resources, parallelism bounds.

``StageDeclarationMixin`` is shared by every stage operator: it turns user arguments into a
:class:`~airflow_provider_finegrained.planning.StageSpec` on ``self.stage_spec`` (the reader's seam)
and wires each upstream stage before this one, so the Airflow dependencies match the data flow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow_provider_finegrained.planning import Distribution, ExchangeMode, ResourceSpec, StageSpec


@dataclass(frozen=True)
class Input:
    """An input of a stage: an upstream stage (operator, XComArg or task id) and how it is exchanged."""

    upstream: Any
    mode: ExchangeMode | str = ExchangeMode.BLOCKING
    distribution: Distribution | str = Distribution.ALL_TO_ALL


def _upstream_task(value: Any) -> Any | None:
    """The operator behind an operator or an XComArg (``.operator``), else None."""
    operator = getattr(value, "operator", None)
    if operator is not None and hasattr(operator, "task_id"):
        return operator
    return value if hasattr(value, "task_id") and hasattr(value, "set_downstream") else None


class StageDeclarationMixin:
    """Builds ``stage_spec`` for a BaseOperator subclass; call :meth:`declare_stage` in ``__init__``."""

    task_id: str
    stage_spec: StageSpec

    def declare_stage(
        self,
        *,
        inputs: Mapping[str, Any] | None = None,
        resources: ResourceSpec | Mapping[str, Any] | None = None,
        parallelism: int | None = None,
        min_parallelism: int | None = None,
        max_parallelism: int | None = None,
        slot_sharing_group: str | None = None,
        memory_weight: float = 1.0,
    ) -> StageSpec:
        declared: dict[str, Mapping[str, str] | str] = {}
        for name, value in (inputs or {}).items():
            stage_input = value if isinstance(value, Input) else Input(value)
            task = _upstream_task(stage_input.upstream)
            if task is not None:
                upstream_id = task.task_id
                task.set_downstream(self)
            elif isinstance(stage_input.upstream, str):
                upstream_id = stage_input.upstream
            else:
                raise TypeError(
                    f"stage {self.task_id!r}: input {name!r} must name an upstream stage (operator, XComArg "
                    f"or task id), got {type(stage_input.upstream).__name__}"
                )
            declared[name] = {
                "upstream": upstream_id,
                "mode": str(stage_input.mode),
                "distribution": str(stage_input.distribution),
            }
        self.stage_spec = StageSpec.build(
            self.task_id,
            declared,
            resources=resources,
            parallelism=parallelism,
            min_parallelism=min_parallelism,
            max_parallelism=max_parallelism,
            slot_sharing_group=slot_sharing_group,
            memory_weight=memory_weight,
        )
        return self.stage_spec
