"""The ``finegrained_spark`` connection: its settings (pure) and the Airflow hook that reads them.

``FineGrainedSparkHook`` is imported lazily so that ``settings`` stays importable without Airflow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_finegrained.hooks.settings import ConnectionSettings, ConnectionSettingsError

if TYPE_CHECKING:
    from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook

__all__ = ["ConnectionSettings", "ConnectionSettingsError", "FineGrainedSparkHook"]


def __getattr__(name: str) -> Any:
    if name == "FineGrainedSparkHook":
        from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook

        return FineGrainedSparkHook
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
