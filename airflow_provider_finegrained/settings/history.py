"""Whether stages learn from their past runs, and how many runs they need first.

Pure: no Airflow or Spark imports.
"""

from __future__ import annotations

from typing import Annotated, ClassVar

from airflow_provider_finegrained.planning.history import DEFAULT_MIN_RUNS as DEFAULT_HISTORY_MIN_RUNS
from airflow_provider_finegrained.settings.field import boolean, integer
from airflow_provider_finegrained.settings.model import SettingsModel


class HistorySettings(SettingsModel):
    """Learning each stage's expansion (shuffle bytes, peak memory per byte on disk) from its past runs."""

    CONCERN: ClassVar[str] = "history"

    learn_from_history: Annotated[
        bool,
        boolean(
            "Learn from history",
            "Correct each stage's parallelism and memory floor with the expansion learned from its past runs "
            "(shuffle bytes and peak memory per byte on disk, kept under the storage root's _history folder); "
            "false decides from bytes on disk alone and records nothing.",
            "true",
        ),
    ] = True
    history_min_runs: Annotated[
        int,
        integer(
            "History runs needed",
            "Usable past runs (succeeded, shuffled, not run inside another stage's jobs) a stage needs before "
            "its learned expansion corrects a decision.",
            "3",
            minimum=1,
        ),
    ] = DEFAULT_HISTORY_MIN_RUNS
