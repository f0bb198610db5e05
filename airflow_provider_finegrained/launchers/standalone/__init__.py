"""Spark standalone: the launcher, and the master's free capacity (``capacity``).

Everything the provider knows of a standalone master lives in this package.
"""

from airflow_provider_finegrained.launchers.standalone.launcher import (
    DRIVER_LOG_BYTES,
    PROGRAM_FOLDER,
    StandaloneLauncher,
)

__all__ = ["DRIVER_LOG_BYTES", "PROGRAM_FOLDER", "StandaloneLauncher"]
