"""Where the settings used to live: their names, re-exported from the settings package.

Kept so that code written against ``hooks.settings`` keeps working; new code imports the settings package
(and, where it needs only one concern, that concern's config).
"""

from __future__ import annotations

from airflow_provider_finegrained.launchers.master import MASTER_FORMS, MasterInfo, MasterKind
from airflow_provider_finegrained.secrets import REDACTED, SECRET_KEY_PATTERN, redact_url, url_password, url_secrets
from airflow_provider_finegrained.secrets import is_secret_key as is_secret_conf_key
from airflow_provider_finegrained.settings import (
    ClusterSettings,
    ConnectionSettings,
    ConnectionSettingsError,
    HistorySettings,
    ParallelismSettings,
    ResourceSettings,
    SettingsModel,
    StorageSettings,
    WarmPoolSettings,
    field_default,
    settable_fields,
    setting_of,
)
from airflow_provider_finegrained.settings.build import EXTRA_PREFIX
from airflow_provider_finegrained.settings.cluster import DEPLOY_MODES, available_cpus, parse_master
from airflow_provider_finegrained.settings.coercion import RESERVED_CONF, WARM_POOL_MODES
from airflow_provider_finegrained.settings.resources import (
    MEMORY_OVERHEAD_FACTOR,
    MIN_MEMORY_OVERHEAD,
    SPARK_MIN_MEMORY,
    GiB,
    MiB,
)
from airflow_provider_finegrained.settings.warm_pool import EMBEDDED_WARM_POOL

__all__ = [
    "DEPLOY_MODES",
    "EMBEDDED_WARM_POOL",
    "EXTRA_PREFIX",
    "MASTER_FORMS",
    "MEMORY_OVERHEAD_FACTOR",
    "MIN_MEMORY_OVERHEAD",
    "REDACTED",
    "RESERVED_CONF",
    "SECRET_KEY_PATTERN",
    "SPARK_MIN_MEMORY",
    "WARM_POOL_MODES",
    "ClusterSettings",
    "ConnectionSettings",
    "ConnectionSettingsError",
    "GiB",
    "HistorySettings",
    "MasterInfo",
    "MasterKind",
    "MiB",
    "ParallelismSettings",
    "ResourceSettings",
    "SettingsModel",
    "StorageSettings",
    "WarmPoolSettings",
    "available_cpus",
    "field_default",
    "is_secret_conf_key",
    "parse_master",
    "redact_url",
    "settable_fields",
    "setting_of",
    "url_password",
    "url_secrets",
]
