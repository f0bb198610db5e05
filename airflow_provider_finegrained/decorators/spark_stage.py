"""``@task.spark_stage``: a TaskFlow stage whose function receives the SparkSession and its inputs.

.. code-block:: python

    @task.spark_stage(max_parallelism=32)
    def q1_pricing_summary(spark, lineitem):
        return lineitem.groupBy("l_returnflag").count()

    q1_pricing_summary(lineitem=scan_lineitem())          # a blocking all-to-all input
    q3(joined=Input(q3_join(), mode="pipelined", distribution="forward"))

Keyword arguments that are stages (their XComArgs, ``Input`` or ``ExternalDataset``) become the
stage's inputs and arrive in the function as DataFrames; other keyword arguments are passed as they
are. The function runs inside the Spark driver, not in the Airflow worker.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from airflow.sdk.bases.decorator import DecoratedOperator, task_decorator_factory

from airflow_provider_finegrained.dags.declaration import ExternalDataset, Input, _upstream_task
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator


def _is_stage_input(value: Any) -> bool:
    if isinstance(value, Input | ExternalDataset):
        return True
    task = _upstream_task(value)
    return task is not None and hasattr(task, "stage_spec")


class _SparkStageDecoratedOperator(DecoratedOperator, SparkStageOperator):  # type: ignore[misc]
    custom_operator_name = "@task.spark_stage"
    template_fields: Sequence[str] = SparkStageOperator.template_fields

    def __init__(
        self,
        *,
        python_callable: Callable[..., Any],
        op_args: Sequence[Any] | None = None,
        op_kwargs: Mapping[str, Any] | None = None,
        inputs: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if op_args:
            raise TypeError(
                f"@task.spark_stage {python_callable.__name__}: pass inputs by name, e.g. "
                f"{python_callable.__name__}(lineitem=scan_lineitem())"
            )
        stage_inputs = dict(inputs or {})
        constants: dict[str, Any] = {}
        for name, value in (op_kwargs or {}).items():
            (stage_inputs if _is_stage_input(value) else constants)[name] = value
        parameters = list(inspect.signature(python_callable).parameters)
        if not parameters:
            raise TypeError(
                f"@task.spark_stage {python_callable.__name__} must take the SparkSession as its first argument"
            )
        super().__init__(
            python_callable=python_callable,
            op_args=[],
            # Validated against the function's signature: the session is supplied by the driver.
            op_kwargs={parameters[0]: None, **(op_kwargs or {})},
            kwargs_to_upstream={"python_callable": python_callable, "op_kwargs": constants, "inputs": stage_inputs},
            **kwargs,
        )


def spark_stage_task(python_callable: Callable[..., Any] | None = None, **kwargs: Any) -> Any:
    """Turn ``fn(spark, **inputs) -> DataFrame`` into a :class:`SparkStageOperator` task."""
    return task_decorator_factory(
        python_callable=python_callable,
        multiple_outputs=False,
        decorated_operator_class=_SparkStageDecoratedOperator,
        **kwargs,
    )
