"""How long a region's executors live: Spark dynamic allocation bounded by the provider's decision.

A region's application starts on the executors the decision planned for its widest stage. Its narrower
stages, and AQE coalescing a stage's partitions below the decided count, leave some of them idle; with a
fixed executor count those stay reserved for the region's whole life (the shared-cluster benchmark's
preliminary run: the provider used 45% of the core-seconds it reserved). So on a cluster every region
runs with dynamic allocation, bounded by the decision:

- ``maxExecutors`` = the planned executors: the application never grows beyond what the capacity step
  granted (a region the gate reduced is sized again on the granted executors, so planned is granted);
- ``minExecutors`` = the minimum-resources floor (0 without one), within the planned executors: a minimum
  above what the region plans is never asked of Spark, since the capacity gate admitted (and its ledger
  reserved) only the planned executors, and the region's own minimum at the gate is already capped the
  same way (``capacity_gate.minimum_slots``); ``initialExecutors`` = the floor, but at least one: that one
  starts with the application, the others are asked for when the first job's tasks wait
  (``schedulerBacklogTimeout``, 1 s, then doubling each second up to the planned count); Spark gives back
  executors down to the floor and grows again to the planned count while tasks are pending (the
  minimum-resources document);
- no external shuffle service is assumed, so ``shuffleTracking`` keeps an executor while it holds shuffle
  data of a running job. Once no running job reads it, Spark's default keeps such an executor until the
  driver's garbage collector cleans the shuffle (``spark.cleaner.periodicGC.interval``, 30 min), in
  practice the application's life; ``shuffleTracking.timeout`` releases it instead. A later job that reads
  a released executor's shuffle output recomputes those map tasks (correct, and rare here: each stage of a
  region is its own query, and a handover read twice is cached);
- ``executorIdleTimeout`` = ``shuffleTracking.timeout`` = ``planning.capacity.EXECUTOR_IDLE_TIMEOUT_S``.

Why the rest at the first job: a region's driver spends 13 to 15 s between registering and its first job on the
loopback cluster at a load average of 5 (imports, inputs, the stage's own driver-side code), 40 to 60 s
at 30. Executors started with the application sat idle through it (24% of the provider's reserved
core-seconds in the shared-cluster run at load 30), and past the idle timeout Spark released them before
the first job and the job waited for new ones anyway. Asked for at the first job, an executor's start
(JVM, registration) follows the driver's own work instead of preceding it, and nothing is held meanwhile.
The first executor is the exception (``executors_from="one_at_start"``, the default): with none from the
start, every region waited the backlog timeout and a whole executor start before its first task (about 1 s
more per region than ``executors_from="start"``, issue 33); one executor's start overlaps the driver's and
costs at most one executor idle for the driver's setup. ``executors_from="first_job"`` asks for none before
the first job, for a shared cluster so loaded that the driver's setup is long. What it gives up is
FLIP-370's even first wave (``minRegisteredResourcesRatio`` 1.0 cannot wait for executors not yet asked
for): the first executors take the first tasks; a connection with ``executors_from="start"`` asks for all
of them at the start (``initialExecutors`` = ``maxExecutors``), and then :func:`starts_on_every_executor`
lets the region job wait for every one before the first tasks.

Why one timeout: on Spark 4.3 with AQE, an executor whose map output a finished query wrote was released
after ``executorIdleTimeout`` (15 s released it; with 60 s and a 5 s shuffle timeout nothing was
released in 35 s idle), so the shuffle timeout cannot be the shorter one that does the work.

Why 30 s: the gaps between a region's jobs were 0.3 to 2 s on the loopback cluster; an executor's
start took 12 to 30 s by load, about what 30 s of keeping it costs, so keeping an idle executor that
long and then releasing it wastes at most twice the best choice made in hindsight (the ski-rental
bound). Spark's default, 60 s, is as long as many whole regions here, and would give back little. What
30 s costs: a region whose narrow stage lasts less than 30 s gives back nothing.

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
from airflow_provider_finegrained.planning.capacity import (
    EXECUTOR_IDLE_TIMEOUT_S,
    ResourceBounds,
    WorkerShape,
    check_resource_stability,
)

_PREFIX = "spark.dynamicAllocation."


def executor_lifecycle_conf(
    bounds: ResourceBounds, sizing: RegionSizing, starts: str = "one_at_start"
) -> dict[str, str]:
    """Dynamic-allocation settings of a region's application on a cluster; none in local mode.

    ``bounds``: the connection's minimum and maximum resources; ``sizing``: the region as the capacity gate
    admitted it (its ``executor_instances`` are never exceeded). ``starts`` (the connection's ``executors_from``):
    ``one_at_start`` one executor when the application starts, the others at the first job; ``first_job`` none
    before the first job; ``start`` every executor when the application starts.
    Raises ValueError (with the numbers) when the bounds cannot both hold in whole executors of the region's
    shape.
    """
    if sizing.local:
        return {}
    shape = WorkerShape(
        slots=sizing.executor_cores // sizing.task_cpus, cpu=float(sizing.executor_cores), memory=sizing.executor_memory
    )
    least, most = check_resource_stability(bounds, shape)
    planned = sizing.executor_instances
    # The planned (= granted) executors, capped by the maximum; the minimum kept within them. Raising the
    # count to the minimum would ask Spark for executors the capacity gate never admitted nor reserved.
    ceiling = planned if most is None else min(planned, most)
    least = min(least, ceiling)
    # One executor from the start when the floor is 0: its start overlaps the driver's own (about 1 s less
    # per region than asking at the first job's backlog); minExecutors stays the floor, so it is given back.
    initial = {"start": ceiling, "first_job": least}.get(starts, max(least, min(1, ceiling)))
    return {
        f"{_PREFIX}enabled": "true",
        f"{_PREFIX}shuffleTracking.enabled": "true",
        f"{_PREFIX}shuffleTracking.timeout": f"{EXECUTOR_IDLE_TIMEOUT_S}s",
        f"{_PREFIX}executorIdleTimeout": f"{EXECUTOR_IDLE_TIMEOUT_S}s",
        f"{_PREFIX}minExecutors": str(least),
        f"{_PREFIX}initialExecutors": str(initial),
        f"{_PREFIX}maxExecutors": str(ceiling),
        # Spark starts max(minExecutors, initialExecutors, executor.instances): keep them equal.
        "spark.executor.instances": str(initial),
        # Standalone ignores executor.instances; cores.max caps the application instead.
        "spark.cores.max": str(ceiling * sizing.executor_cores),
    }


def starts_on_every_executor(conf: Mapping[str, str]) -> bool:
    """Whether an application with these settings asks for all its executors when it starts.

    True for a fixed executor count (dynamic allocation off) or ``initialExecutors`` at least
    ``maxExecutors``; then the region job waits for every one before the first tasks (FLIP-370's even
    spread). False for the provider's own settings, which ask for executors at the first job.
    """
    if not _enabled(conf):
        return True
    initial, most = _count(conf.get(f"{_PREFIX}initialExecutors")), _count(conf.get(f"{_PREFIX}maxExecutors"))
    return initial is not None and most is not None and initial >= most


def _count(value: object) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None


def _enabled(conf: Mapping[str, str]) -> bool:
    return str(conf.get(f"{_PREFIX}enabled", "")).strip().lower() == "true"


def lifecycle_text(conf: Mapping[str, str]) -> str:
    """How the application's executors come and go, for the trace and the UI; empty when they are fixed.

    ``1 at the start, up to 4 from the first job, released when idle 30 s`` (``, 2 kept`` with a minimum), from the
    application's final settings, so a connection's override shows as it ran.
    """
    if not _enabled(conf):
        return ""
    idle = _seconds_text(str(conf.get(f"{_PREFIX}executorIdleTimeout", "60s")))
    shuffle_timeout = conf.get(f"{_PREFIX}shuffleTracking.timeout")
    tracking = str(conf.get(f"{_PREFIX}shuffleTracking.enabled", "true")).strip().lower() == "true"
    if not tracking or conf.get("spark.shuffle.service.enabled", "").strip().lower() == "true":
        released = f"released when idle {idle}"  # no shuffle data keeps an executor
    elif shuffle_timeout is None:
        released = f"released when idle {idle}, kept while holding shuffle data"
    else:
        # shuffleTracking.timeout is in milliseconds when given as a bare number.
        shuffle = _seconds_text(str(shuffle_timeout), bare_unit="ms")
        released = f"released when idle {shuffle}" + (f" ({idle} without shuffle data)" if shuffle != idle else "")
    most = conf.get(f"{_PREFIX}maxExecutors")
    initial = _count(conf.get(f"{_PREFIX}initialExecutors"))
    every = starts_on_every_executor(conf)
    start = "" if every else " from the first job"
    first = f"{initial} at the start, " if initial and not every else ""
    text = f"{first}up to {most}{start}, {released}" if most else released
    least = str(conf.get(f"{_PREFIX}minExecutors", "0")).strip()
    if least not in ("", "0"):
        text += f", {least} kept"
    return text


_TIME = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|min|h)?\s*$", re.IGNORECASE)
_UNIT_S = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def _seconds_text(value: str, bare_unit: str = "s") -> str:
    """A Spark time setting (``15s``, ``500ms``, ``1min``; a bare number: ``bare_unit``) as ``15 s``; else as given."""
    match = _TIME.match(value)
    if match is None:
        return value
    seconds = float(match.group(1)) * _UNIT_S[(match.group(2) or bare_unit).lower()]
    return f"{seconds:g} s"
