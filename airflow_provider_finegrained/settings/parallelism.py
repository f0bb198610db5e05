"""The adaptive parallelism decision's settings (FLIP-187): what the parallelism decider receives.

Pure: no Airflow or Spark imports.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from airflow_provider_finegrained.planning import DEFAULT_AVG_BYTES_PER_TASK, ParallelismConfig
from airflow_provider_finegrained.planning.parallelism import NORMALIZE_MODES
from airflow_provider_finegrained.settings.field import boolean, byte_size, choice, integer, number
from airflow_provider_finegrained.settings.model import SettingsModel


class ParallelismSettings(SettingsModel):
    """The adaptive parallelism decision's knobs (FLIP-187), and Spark's AQE inside each stage."""

    CONCERN: ClassVar[str] = "parallelism"

    min_parallelism: Annotated[
        int,
        integer("Minimum parallelism", "Lower bound of a stage's adaptive parallelism.", "1", minimum=1),
    ] = 1
    max_parallelism: Annotated[
        int,
        integer("Maximum parallelism", "Upper bound of a stage's adaptive parallelism.", "128", minimum=1),
    ] = 128
    avg_bytes_per_task: Annotated[
        int,
        byte_size(
            "Bytes per task",
            "Upstream bytes one task should read; a stage's parallelism is its input bytes divided by this.",
            "64m",
            minimum=1,
        ),
    ] = DEFAULT_AVG_BYTES_PER_TASK
    max_broadcast_ratio: Annotated[
        float,
        number(
            "Max broadcast ratio",
            "Largest share of a task's bytes that broadcast inputs may count for, in [0, 1).",
            "0.5",
            minimum=0,
            below=1,
        ),
    ] = 0.5
    normalize: Annotated[
        Literal["none", "power_of_two"],
        choice(
            "Normalize parallelism",
            "'none' keeps the computed parallelism; 'power_of_two' rounds it to the nearest power of two.",
            "none",
            choices=NORMALIZE_MODES,
        ),
    ] = "none"
    default_source_parallelism: Annotated[
        int | None,
        integer(
            "Default source parallelism",
            "Parallelism of a source stage whose input size is unknown.",
            "8",
            minimum=1,
            default_text="max_parallelism",
        ),
    ] = None
    adaptive_query_execution: Annotated[
        bool,
        boolean(
            "Adaptive query execution",
            "Keep Spark AQE on inside each stage as a second, in-query correction of the planned parallelism.",
            "true",
        ),
    ] = True

    def parallelism_config(self, **overrides: Any) -> ParallelismConfig:
        """The adaptive-parallelism bounds of these settings, with per-stage ``overrides``."""
        params: dict[str, Any] = {
            "min_parallelism": self.min_parallelism,
            "max_parallelism": self.max_parallelism,
            "avg_bytes_per_task": self.avg_bytes_per_task,
            "default_source_parallelism": self.default_source_parallelism,
            "max_broadcast_ratio": self.max_broadcast_ratio,
            "normalize": self.normalize,
        }
        params.update(overrides)
        return ParallelismConfig(**params)
