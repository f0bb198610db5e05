"""Cluster capacity: read what is free (standalone, YARN, declared), reserve it across parallel regions.

Imports neither Airflow nor Spark.
"""

from airflow_provider_finegrained.capacity.ledger import (
    DEFAULT_MAX_AGE_S,
    LedgerView,
    Reservation,
    ReservationLedger,
    subtract,
)
from airflow_provider_finegrained.capacity.request import executor_request, local_request
from airflow_provider_finegrained.capacity.sources import (
    CapacityUnavailable,
    ClusterCapacity,
    HttpRequest,
    QueueHeadroom,
    declared_capacity,
    fetch_standalone_capacity,
    fetch_yarn_capacity,
    limit_to_headroom,
    parse_standalone_status,
    parse_yarn_metrics,
    parse_yarn_nodes,
    parse_yarn_queue_headroom,
    parse_yarn_running_apps,
    yarn_requests,
)

__all__ = [
    "DEFAULT_MAX_AGE_S",
    "CapacityUnavailable",
    "ClusterCapacity",
    "HttpRequest",
    "LedgerView",
    "QueueHeadroom",
    "Reservation",
    "ReservationLedger",
    "declared_capacity",
    "executor_request",
    "fetch_standalone_capacity",
    "fetch_yarn_capacity",
    "limit_to_headroom",
    "local_request",
    "parse_standalone_status",
    "parse_yarn_metrics",
    "parse_yarn_nodes",
    "parse_yarn_queue_headroom",
    "parse_yarn_running_apps",
    "subtract",
    "yarn_requests",
]
