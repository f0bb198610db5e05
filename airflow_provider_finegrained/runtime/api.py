"""The runtime API for stages written as PySpark application files.

Inside an application file that a ``SparkStageOperator(application=...)`` runs::

    from airflow_provider_finegrained.runtime.api import current_stage

    stage = current_stage()
    orders = stage.inputs["orders"]          # a DataFrame per declared input
    result = orders.groupBy("o_custkey").count()
    stage.publish(result)                    # the stage's output; committed by the provider

``stage.spark`` is the SparkSession, ``stage.name`` the stage name, ``stage.args`` the application
arguments. Data is read and written by the provider: the file never handles paths.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class StageContextError(RuntimeError):
    """The runtime API was used outside a stage run, or the stage published nothing."""


@dataclass
class StageContext:
    name: str
    spark: Any
    inputs: Mapping[str, Any]
    args: Sequence[str] = ()
    published: Any = field(default=None, repr=False)

    def publish(self, df: Any) -> None:
        """Declare ``df`` the stage's output."""
        self.published = df


_current: StageContext | None = None


def current_stage() -> StageContext:
    """The stage this application file runs as; an error outside the provider's driver."""
    if _current is None:
        raise StageContextError(
            "current_stage() is only available when the provider runs this file as a stage "
            "(SparkStageOperator(application=...)); it was not started that way"
        )
    return _current


def _activate(context: StageContext | None) -> None:
    global _current
    _current = context
