"""The Airflow side of the ``finegrained_spark`` connection: the hook that reads it into settings.

The settings themselves are the pure package :mod:`airflow_provider_finegrained.settings`;
``FineGrainedSparkHook`` is imported lazily so that importing this package needs no Airflow.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_finegrained.settings import ConnectionSettings, ConnectionSettingsError

if TYPE_CHECKING:
    from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook

__all__ = ["ConnectionSettings", "ConnectionSettingsError", "FineGrainedSparkHook"]


def __getattr__(name: str) -> Any:
    if name == "FineGrainedSparkHook":
        from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook

        return FineGrainedSparkHook
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
