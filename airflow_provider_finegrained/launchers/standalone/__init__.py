"""Spark standalone: the launcher, and the master's REST client for drivers (``client``).

Everything the provider knows of a standalone master lives in this package; the programs that run next
to a cluster-mode driver stay in ``spark/standalone_driver.py`` (standard library only).
"""

from airflow_provider_finegrained.launchers.standalone.launcher import (
    DRIVER_LOG_BYTES,
    PROGRAM_FOLDER,
    StandaloneLauncher,
)

__all__ = ["DRIVER_LOG_BYTES", "PROGRAM_FOLDER", "StandaloneLauncher"]
