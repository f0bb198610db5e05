"""How big one Spark application may be: capacity, executor shape, minimum and maximum resources, waiting.

Pure: no Airflow or Spark imports.
"""

from __future__ import annotations

from typing import Annotated, ClassVar, Final, Literal

from airflow_provider_finegrained.planning import ResourceBounds
from airflow_provider_finegrained.settings import coercion
from airflow_provider_finegrained.settings.field import byte_size, choice, integer, number, string
from airflow_provider_finegrained.settings.model import SettingsModel

MiB: Final = 2**20
GiB: Final = 2**30
EXECUTOR_STARTS: Final = ("one_at_start", "first_job", "start")
"""``executors_from``: when a region's application on a cluster asks for its executors."""
ADMISSIONS: Final = ("fit_now", "cluster_queue")
"""``admission``: how a region on a cluster is let in (``planning.capacity``'s two decisions)."""
SPARK_MIN_MEMORY: Final = 450 * MiB
"""Spark refuses a JVM with less: 1.5 times its 300 MiB reserved memory."""
MEMORY_OVERHEAD_FACTOR: Final = 0.10
MIN_MEMORY_OVERHEAD: Final = 384 * MiB
"""Spark's defaults for ``spark.executor.memoryOverhead`` (also :class:`ClusterProfile`'s)."""


class ResourceSettings(SettingsModel):
    """How big one Spark application may be, the executor shape, and the minimum/maximum resources."""

    CONCERN: ClassVar[str] = "resources"

    total_cores: Annotated[
        int,
        integer(
            "Total cores",
            "Cores one Spark application may use. Local masters imply it (N of local[N], this machine's cores "
            "for local[*], N*C for local-cluster[N,C,M]); required for spark://, YARN and Kubernetes.",
            "16",
            minimum=1,
            default_text="implied by a local master; required otherwise",
        ),
    ]
    total_memory: Annotated[
        int,
        byte_size(
            "Total memory",
            "Memory one Spark application may use, as bytes or a size like 64g. Default: driver_memory for "
            "local[...]; N*M MiB for local-cluster[N,C,M]; otherwise total_cores / executor_cores executors of "
            "executor_memory plus Spark's overhead (10%, at least 384 MiB).",
            "64g",
            minimum=1,
            default_text="derived from the master and executor shape",
        ),
    ]
    executor_cores: Annotated[
        int,
        integer(
            "Executor cores",
            "Cores of one executor for stages without a ResourceSpec (ignored by local[...]).",
            "2",
            minimum=1,
            default_text="2 (C for local-cluster[N,C,M])",
        ),
    ] = 2
    executor_memory: Annotated[
        int,
        byte_size(
            "Executor memory",
            "Heap of one executor, like 4g (at least 450m, Spark's minimum). Ignored by local[...], where "
            "driver_memory is all the stages get.",
            "4g",
            minimum=SPARK_MIN_MEMORY,
            why="Spark's minimum for a JVM",
            default_text="2g (M MiB for local-cluster[N,C,M])",
        ),
    ] = 2 * GiB
    driver_memory: Annotated[
        int,
        byte_size(
            "Driver memory",
            "spark.driver.memory, like 2g (at least 450m). In local mode this is the memory the stages get.",
            "2g",
            minimum=SPARK_MIN_MEMORY,
            why="Spark's minimum for a JVM",
        ),
    ] = 2 * GiB
    min_slots: Annotated[
        int | None,
        integer(
            "Minimum slots",
            "Minimum resources: task slots (cores) kept for the pipeline; checked against max_slots in whole "
            "executors.",
            "4",
            minimum=0,
        ),
    ] = None
    max_slots: Annotated[
        int | None,
        integer("Maximum slots", "Maximum resources: task slots (cores) the pipeline may hold.", "32", minimum=0),
    ] = None
    min_memory: Annotated[
        int | None,
        byte_size("Minimum memory", "Minimum resources: executor memory kept for the pipeline, like 8g.", "8g"),
    ] = None
    max_memory: Annotated[
        int | None,
        byte_size("Maximum memory", "Maximum resources: executor memory the pipeline may hold, like 64g.", "64g"),
    ] = None
    min_cpu: Annotated[
        float | None,
        number(
            "Minimum CPU", "Minimum resources: CPU cores kept for the pipeline (may be fractional).", "4", minimum=0
        ),
    ] = None
    max_cpu: Annotated[
        float | None,
        number("Maximum CPU", "Maximum resources: CPU cores the pipeline may hold.", "32", minimum=0),
    ] = None
    total_gpus: Annotated[
        float,
        number(
            "Total GPUs",
            "GPUs one Spark application may use where the capacity is declared (local masters, Kubernetes, YARN "
            "without yarn_resourcemanager_url); a standalone master and YARN's ResourceManager report their own. "
            "0: a region whose ResourceSpecs ask for GPUs is refused as never fitting.",
            "4",
            minimum=0,
        ),
    ] = 0.0
    gpu_discovery_script: Annotated[
        str | None,
        string(
            "GPU discovery script",
            "spark.executor.resource.gpu.discoveryScript for applications whose ResourceSpecs ask for GPUs (set "
            "only on those: Spark refuses a script without a GPU amount): a script on every executor's node that "
            "prints its GPUs' addresses as JSON, like Spark's examples/src/main/scripts/getGpusResources.sh. "
            "Needed on YARN and Kubernetes; a standalone worker hands its own GPUs to its executors.",
            "/opt/spark/examples/src/main/scripts/getGpusResources.sh",
            values="absolute path",
            check=coercion.absolute_path,
        ),
    ] = None
    capacity_wait_timeout: Annotated[
        float,
        number(
            "Capacity wait timeout (s)",
            "When not even a region's minimum fits the free capacity, its task waits (deferred, holding no worker "
            "slot) this many seconds for capacity to free, then fails naming what it asked and what was free. "
            "0 fails at once.",
            "3600",
            minimum=0,
        ),
    ] = 3600.0
    capacity_poll_interval: Annotated[
        float,
        number(
            "Capacity poll interval (s)",
            "How often a waiting region asks the cluster for its free capacity.",
            "15",
            minimum=0.1,
        ),
    ] = 15.0
    trigger_min_wait: Annotated[
        float,
        number(
            "Trigger minimum wait (s)",
            "A deferred stage's trigger fires no sooner than this after the deferral, so that Airflow's scheduler "
            "has taken the deferring try's exit before the task resumes (Airflow 3.3 can otherwise fail the resumed "
            "task on that stale event: apache/airflow#72716). 0 fires at once.",
            "10",
            minimum=0,
        ),
    ] = 10.0
    executors_from: Annotated[
        Literal["one_at_start", "first_job", "start"],
        choice(
            "Executors from",
            "When a region's application on a cluster asks for its executors: 'one_at_start' one when it starts "
            "(its start overlapping the driver's), the others when its first job's tasks wait; 'first_job' none "
            "before the first job's tasks wait (none idle while the driver starts: for a busy shared cluster); "
            "'start' all at once when it starts, the first wave waiting for every one (FLIP-370's even first "
            "wave, at the cost of executors idle meanwhile). A minimum (min_*) is asked for at the start always.",
            "one_at_start",
            choices=EXECUTOR_STARTS,
        ),
    ] = "one_at_start"
    admission: Annotated[
        Literal["fit_now", "cluster_queue"],
        choice(
            "Admission",
            "How a region on a cluster gets its executors: 'fit_now' (FLIP-138) runs it on what is free now, "
            "smaller when only part of it is, and defers it when not even its minimum fits; 'cluster_queue' asks "
            "the cluster manager for every executor it planned and waits in the cluster manager's own queue for "
            "those not free, never smaller (for a busy shared cluster: docs/simulation.md). Not for local masters.",
            "fit_now",
            choices=ADMISSIONS,
        ),
    ] = "fit_now"

    def resource_bounds(self) -> ResourceBounds:
        """The minimum and maximum resources of the connection (unset: no bound)."""
        return ResourceBounds(
            min_slots=self.min_slots or 0,
            max_slots=self.max_slots,
            min_cpu=self.min_cpu or 0,
            max_cpu=self.max_cpu,
            min_memory=self.min_memory or 0,
            max_memory=self.max_memory,
        )
