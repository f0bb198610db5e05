"""The planning core: pure functions from a graph of stages and measured bytes to decisions.

Imports neither Airflow nor Spark, so it can be read, tested and reused alone.
"""

from airflow_provider_finegrained.planning.balance import decide_balance
from airflow_provider_finegrained.planning.capacity import (
    CapacityDecision,
    CapacityOutcome,
    ExecutorRequest,
    ResourceBounds,
    WorkerCapacity,
    WorkerShape,
    check_resource_stability,
    decide_capacity,
    queue_capacity,
)
from airflow_provider_finegrained.planning.cluster_profile import (
    RESERVED_MEMORY,
    SPARK_DEFAULT_MEMORY_FRACTION,
    ClusterProfile,
)
from airflow_provider_finegrained.planning.enums import Distribution, ExchangeMode
from airflow_provider_finegrained.planning.expansion import LearnedExpansion
from airflow_provider_finegrained.planning.forward_groups import (
    UNDECIDED,
    GroupBounds,
    compute_forward_groups,
    intersect_bounds,
    propagate_forward_parallelism,
)
from airflow_provider_finegrained.planning.history import StageRun, run_from_trace
from airflow_provider_finegrained.planning.input_balance import InputBalance
from airflow_provider_finegrained.planning.parallelism import (
    DEFAULT_AVG_BYTES_PER_TASK,
    ConsumedResult,
    ParallelismConfig,
    ParallelismDecision,
    decide_parallelism,
    explain_parallelism,
)
from airflow_provider_finegrained.planning.plan import DagPlan, Exchange, StagePlan, plan_stages
from airflow_provider_finegrained.planning.regions import compute_pipelined_regions
from airflow_provider_finegrained.planning.resources import (
    ResourceSpec,
    check_specs_not_mixed,
    managed_memory_fractions,
)
from airflow_provider_finegrained.planning.scan_packing import simulate_scan_tasks
from airflow_provider_finegrained.planning.sizing import RegionSizing, size_region
from airflow_provider_finegrained.planning.stage_sizing import StageDemand, StageSizing, even_waves, split_bytes
from airflow_provider_finegrained.planning.stages import StageGraphError, StageInput, StageSpec
from airflow_provider_finegrained.planning.units import format_bytes, parse_bytes

__all__ = [
    "DEFAULT_AVG_BYTES_PER_TASK",
    "RESERVED_MEMORY",
    "SPARK_DEFAULT_MEMORY_FRACTION",
    "UNDECIDED",
    "CapacityDecision",
    "CapacityOutcome",
    "ClusterProfile",
    "ConsumedResult",
    "DagPlan",
    "Distribution",
    "Exchange",
    "ExchangeMode",
    "ExecutorRequest",
    "GroupBounds",
    "InputBalance",
    "LearnedExpansion",
    "ParallelismConfig",
    "ParallelismDecision",
    "RegionSizing",
    "ResourceBounds",
    "ResourceSpec",
    "StageDemand",
    "StageGraphError",
    "StageInput",
    "StagePlan",
    "StageRun",
    "StageSizing",
    "StageSpec",
    "WorkerCapacity",
    "WorkerShape",
    "check_resource_stability",
    "check_specs_not_mixed",
    "compute_forward_groups",
    "compute_pipelined_regions",
    "decide_balance",
    "decide_capacity",
    "decide_parallelism",
    "even_waves",
    "explain_parallelism",
    "format_bytes",
    "intersect_bounds",
    "managed_memory_fractions",
    "parse_bytes",
    "plan_stages",
    "propagate_forward_parallelism",
    "queue_capacity",
    "run_from_trace",
    "simulate_scan_tasks",
    "size_region",
    "split_bytes",
]
