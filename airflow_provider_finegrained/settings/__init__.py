"""The settings of a ``finegrained_spark`` connection, as a pure package composed by concern.

Each concern is a small frozen config whose every field is declared once, with its type, default, allowed
values, doc text and whether it holds secrets (its :class:`~.field.Setting` metadata):

- :class:`ClusterSettings` (``cluster``): where Spark runs and how it is reached; what a launcher receives;
- :class:`StorageSettings` (``storage``): the storage root and its credentials' connection;
- :class:`ResourceSettings` (``resources``): capacity, executor shape, minimum and maximum resources;
- :class:`ParallelismSettings` (``parallelism``): the adaptive parallelism decision's knobs;
- :class:`HistorySettings` (``history``): learning from past runs;
- :class:`WarmPoolSettings` (``warm``): the warm pool.

:class:`ConnectionSettings` composes them and adds the rules across concerns. The connection form and the
``[finegrained]`` options (``form``), the reference table of docs/connection.md (``docs``), the coercion of
raw strings and the masking of secrets are all read from the declarations. No Airflow or Spark imports:
the hook (``hooks.finegrained_spark``) reads the Airflow connection and builds these from it.
"""

from __future__ import annotations

from airflow_provider_finegrained.settings.build import CONCERNS, concern_of, field_default, settable_fields, setting_of
from airflow_provider_finegrained.settings.cluster import ClusterSettings
from airflow_provider_finegrained.settings.coercion import ConnectionSettingsError
from airflow_provider_finegrained.settings.connection import ConnectionSettings
from airflow_provider_finegrained.settings.field import Setting
from airflow_provider_finegrained.settings.history import HistorySettings
from airflow_provider_finegrained.settings.model import SettingsModel
from airflow_provider_finegrained.settings.parallelism import ParallelismSettings
from airflow_provider_finegrained.settings.resources import ResourceSettings
from airflow_provider_finegrained.settings.storage import StorageSettings
from airflow_provider_finegrained.settings.warm_pool import WarmPoolSettings

__all__ = [
    "CONCERNS",
    "ClusterSettings",
    "ConnectionSettings",
    "ConnectionSettingsError",
    "HistorySettings",
    "ParallelismSettings",
    "ResourceSettings",
    "Setting",
    "SettingsModel",
    "StorageSettings",
    "WarmPoolSettings",
    "concern_of",
    "field_default",
    "settable_fields",
    "setting_of",
]
