"""The policies the simulator runs a workload under (docs/simulation.md), and their settings.

- ``fixed``: every DAG task (stage) is one application holding ``fixed_executors`` executors from its
  registration to its end; Spark's default split size and 200 shuffle partitions coalesced by AQE (with
  ``adaptive`` off, exactly ``shuffle_partitions``: the month's hand-sized policy).
- ``dynamic``: the same applications with dynamic allocation: executors asked for after a backlog of
  ``backlog_timeout_s``, doubling each further second, idle ones (holding no shuffle data) removed
  after ``idle_timeout_s``.
- ``provider``: the provider as it runs a region on a cluster (``execution/executor_lifecycle.py``): one
  application per region, sized by the planning core as the provider's ``decide_region`` does
  (:mod:`bench.simulate.decision`: parallelism from the bytes consumed, ``size_region``) and admitted by
  ``decide_capacity`` against the free executors (the provider's capacity gate, modelled here); the
  capacity ledger keeps the admitted places until the application's first executor is added; executors
  are asked for at the first job (dynamic allocation from 0, the backlog ramp, bounded by the admitted
  count) and released after ``idle_timeout_s`` idle (shuffle tracking's timeout the same).
- ``provider+start``: as ``provider``, with every admitted executor asked for when the application
  registers (the connection's ``executors_from="start"``).
- ``provider+held``: the admitted executors held from registration to the region's end (dynamic
  allocation off: a connection's ``spark.dynamicAllocation.enabled=false``, and the provider before
  ``executor_lifecycle``).
- ``provider+grow``: as ``provider``, but the bound is the executors the region REQUESTED: a region
  admitted smaller asks for the rest as executors free up (a change to the provider's decisions this
  simulator proposes, not what it does).
- ``provider+queue``: the provider with the connection's ``admission="cluster_queue"``: every region asks
  the cluster manager for all the executors it requested (``queue_capacity``; at its first job, bounded by
  the request) and waits in the cluster manager's queue like any application; only a region that could
  never fit is refused; nothing is held in the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass

MiB = 2**20
POLICIES = ("fixed", "dynamic", "provider", "provider+start", "provider+held", "provider+grow", "provider+queue")
RELEASING = ("provider", "provider+start", "provider+grow", "provider+queue")
"""The provider's variants whose region applications give back idle executors (dynamic allocation)."""


@dataclass(frozen=True)
class PolicySpec:
    """A policy and its settings; the defaults are Spark's and the provider's own."""

    name: str
    fixed_executors: int = 4
    default_parallelism: int = 16
    """``spark.default.parallelism`` for Spark's split size and AQE (the fixed application's cores)."""
    shuffle_partitions: int = 200
    adaptive: bool = True
    """AQE: the fixed and dynamic policies' shuffle partitions coalesced towards ``advisory_partition_bytes``;
    off, every shuffle runs ``shuffle_partitions`` tasks (``spark.sql.adaptive.enabled=false``)."""
    advisory_partition_bytes: int = 64 * MiB
    max_executors: int | None = None
    backlog_timeout_s: float = 1.0
    idle_timeout_s: float = 60.0
    max_parallelism: int = 128
    """The provider's ParallelismConfig default."""
    avg_bytes_per_task: int = 64 * MiB
    shuffle_timeout_s: float | None = None
    """The releasing provider variants: an idle executor holding shuffle data is released after this (None:
    Spark's default, kept while the application runs)."""
    min_admit_share: float = 0.0
    """The provider's variants: a region the capacity decision would run smaller waits instead when it would get
    fewer than this share of the executors it asked for (a change this simulator tries, not what the provider
    does; 0: the provider's decision as it is)."""

    def __post_init__(self) -> None:
        if self.name not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {self.name!r}")
        if self.fixed_executors < 1 or self.default_parallelism < 1 or self.shuffle_partitions < 1:
            raise ValueError(
                f"policy {self.name}: fixed_executors, default_parallelism and shuffle_partitions must be >= 1"
            )
        if not 0 <= self.min_admit_share <= 1:
            raise ValueError(f"policy {self.name}: min_admit_share must be in [0, 1], got {self.min_admit_share!r}")
