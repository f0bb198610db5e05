"""The Airflow worker's Python environment, packed once per content hash and shipped to YARN's containers.

``digest``: what identifies an environment; ``pack``: the archive; ``ship``: where it is kept (the storage
root) and the Spark settings that unpack it in every container. No Airflow imports.
"""

from airflow_provider_finegrained.python_env.digest import environment_digest
from airflow_provider_finegrained.python_env.pack import PackError, pack_environment
from airflow_provider_finegrained.python_env.ship import PYTHON_ENV_KEYS, python_env_conf, ship_environment

__all__ = [
    "PYTHON_ENV_KEYS",
    "PackError",
    "environment_digest",
    "pack_environment",
    "python_env_conf",
    "ship_environment",
]
