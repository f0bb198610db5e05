"""Cluster capacity: what is free (a cluster manager's answer, read by its launcher package, or a declared
capacity), reserved across parallel regions.

Imports neither Airflow nor Spark.
"""

from airflow_provider_finegrained.capacity.ledger import (
    DEFAULT_MAX_AGE_S,
    LedgerView,
    Reservation,
    ReservationLedger,
    subtract,
)
from airflow_provider_finegrained.capacity.request import application_master, executor_request, local_request
from airflow_provider_finegrained.capacity.sources import (
    CapacityUnavailable,
    ClusterCapacity,
    declared_capacity,
)

__all__ = [
    "DEFAULT_MAX_AGE_S",
    "CapacityUnavailable",
    "ClusterCapacity",
    "LedgerView",
    "Reservation",
    "ReservationLedger",
    "application_master",
    "declared_capacity",
    "executor_request",
    "local_request",
    "subtract",
]
