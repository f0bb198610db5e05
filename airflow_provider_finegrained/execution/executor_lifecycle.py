"""How long a region's executors live: Spark dynamic allocation bounded by the provider's decision.

A region's application starts on the executors the decision planned for its widest stage. Its narrower
stages, and AQE coalescing a stage's partitions below the decided count, leave some of them idle; with a
fixed executor count those stay reserved for the region's whole life (the shared-cluster benchmark's
preliminary run: the provider used 45% of the core-seconds it reserved). So on a cluster every region
runs with dynamic allocation, bounded by the decision:

- ``initialExecutors`` = ``maxExecutors`` = the planned executors: the first wave still starts on all of
  them (with ``spark.scheduler.minRegisteredResourcesRatio`` 1.0, FLIP-370's even spread), and the
  application never grows beyond what the capacity step granted;
- ``minExecutors`` = the minimum-resources floor (0 without one): Spark gives back executors down to it
  and grows again to the planned count while tasks are pending (the minimum-resources document);
- no external shuffle service is assumed, so ``shuffleTracking`` keeps an executor while it holds shuffle
  data of a running job. Once no running job reads its shuffle data, Spark's default keeps it until the
  driver's garbage collector cleans the shuffle (``spark.cleaner.periodicGC.interval``, 30 min), which in
  practice is the application's life; ``shuffleTracking.timeout`` = the idle timeout releases it instead.
  A later job that reads a released executor's shuffle output recomputes those map tasks (correct, and
  rare here: each stage of a region is its own query, and its handover to the next is cached);
- ``executorIdleTimeout`` = :data:`IDLE_TIMEOUT_S` (Spark's default is 60 s, as long as many whole regions).

Why 15 s: it must outlast the gaps between a region's Spark jobs (the driver commits a stage's output and
reads the next one's inputs in between: 1 to 5 s measured on the loopback cluster), or executors would
leave between two jobs that both need them; and it should be about what re-acquiring an executor costs
(a standalone executor's JVM start and registration, 3 to 8 s here): keeping an idle executor that long
and then releasing it wastes at most twice the best choice made in hindsight (the ski-rental bound).
Regions here last tens of seconds to minutes, so 15 s releases most of what a narrower stage leaves idle.

``cachedExecutorIdleTimeout`` keeps Spark's default (never while the region's in-memory handover is
cached); Spark applies the shorter of it and the shuffle timeout to an executor holding both.

Local mode has one JVM and no executors to give back; the warm pool sets its own dynamic allocation
(``warm/server.py``). A connection's or a stage's ``spark_conf`` still wins (``region_job.application_conf``
applies them after this), e.g. ``spark.dynamicAllocation.enabled=false`` for a fixed executor count.
No Airflow imports.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from airflow_provider_finegrained.planning import RegionSizing
from airflow_provider_finegrained.planning.capacity import ResourceBounds, WorkerShape, check_resource_stability

IDLE_TIMEOUT_S = 15
"""Seconds an executor without running tasks (or with only finished jobs' shuffle data) is kept."""

_PREFIX = "spark.dynamicAllocation."


def executor_lifecycle_conf(bounds: ResourceBounds, sizing: RegionSizing) -> dict[str, str]:
    """Dynamic-allocation settings of a region's application on a cluster; none in local mode.

    ``bounds``: the connection's minimum and maximum resources. Raises ValueError (with the numbers)
    when they cannot both hold in whole executors of the region's shape.
    """
    if sizing.local:
        return {}
    shape = WorkerShape(
        slots=sizing.executor_cores // sizing.task_cpus, cpu=float(sizing.executor_cores), memory=sizing.executor_memory
    )
    least, most = check_resource_stability(bounds, shape)
    planned = sizing.executor_instances
    # The planned executors, raised to the minimum, capped by the maximum (never below the minimum).
    ceiling = max(planned, least) if most is None else max(least, min(planned, most))
    timeout = f"{IDLE_TIMEOUT_S}s"
    return {
        f"{_PREFIX}enabled": "true",
        f"{_PREFIX}shuffleTracking.enabled": "true",
        f"{_PREFIX}shuffleTracking.timeout": timeout,
        f"{_PREFIX}executorIdleTimeout": timeout,
        f"{_PREFIX}minExecutors": str(least),
        f"{_PREFIX}initialExecutors": str(ceiling),
        f"{_PREFIX}maxExecutors": str(ceiling),
        # Spark starts max(minExecutors, initialExecutors, executor.instances): keep them equal.
        "spark.executor.instances": str(ceiling),
        # Standalone ignores executor.instances; cores.max caps the application instead.
        "spark.cores.max": str(ceiling * sizing.executor_cores),
    }


def lifecycle_text(conf: Mapping[str, str]) -> str:
    """How the application's executors come and go, for the trace and the UI; empty when they are fixed.

    ``up to 4, released when idle 15 s`` (``, 2 kept`` with a minimum), from the application's final
    settings, so a connection's override shows as it ran.
    """
    if str(conf.get(f"{_PREFIX}enabled", "")).strip().lower() != "true":
        return ""
    most = conf.get(f"{_PREFIX}maxExecutors")
    idle = _seconds_text(str(conf.get(f"{_PREFIX}executorIdleTimeout", "60s")))
    text = f"up to {most}, released when idle {idle}" if most else f"released when idle {idle}"
    least = str(conf.get(f"{_PREFIX}minExecutors", "0")).strip()
    if least not in ("", "0"):
        text += f", {least} kept"
    return text


_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?\s*$", re.IGNORECASE)
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def _seconds_text(value: str) -> str:
    """A Spark time setting (``15s``, ``500ms``, ``1min``; a bare number is seconds) as ``15 s``; else as given."""
    match = _TIME.match(value)
    if match is None:
        return value
    seconds = float(match.group(1)) * _UNIT_S[(match.group(2) or "s").lower()]
    return f"{seconds:g} s"
