"""The region job: what the operator hands the Spark driver (a JSON file), and what comes back.

One region is one Spark application. The job lists its stages in order with their inputs and
per-stage session settings; the driver writes one status file per stage into the job's folder.
Pure Python: the operator writes it, the driver reads it. The folder is a storage location (a local
path or any fsspec URL): every file here is read and written through :mod:`storage.filesystem`,
replaced atomically for readers (a temporary name then a rename locally; one put on object stores).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from airflow_provider_finegrained.storage import filesystem
from airflow_provider_finegrained.storage.filesystem import StorageOptions
from airflow_provider_finegrained.storage.locations import join

InputSource = Literal["committed", "stage", "external"]
StageState = Literal["success", "failed", "not_run"]


CONTEXT_NOT_STARTED = 75
"""The driver's exit code when its SparkContext did not start (EX_TEMPFAIL): no stage ran, nothing was written,
so the leader may submit the region again (``execution.region_launch``)."""
CONTEXT_DID_NOT_START = "the SparkContext did not start"
"""What the driver prints before it exits with ``CONTEXT_NOT_STARTED``, followed by the error."""


def status_path(folder: str, stage: str) -> str:
    """Where the driver reports one stage's result in a region's job folder."""
    return join(folder, f"status-{stage}.json")


def trace_path(folder: str, stage: str) -> str:
    """Where the leader leaves one stage's decision trace for that stage's own task."""
    return join(folder, f"trace-{stage}.json")


@dataclass(frozen=True)
class InputRef:
    """One input of a stage: a committed upstream output, a stage of the same region, or external data."""

    name: str
    source: InputSource
    path: str | None = None
    format: str = "parquet"
    stage: str | None = None
    broadcast: bool = False
    options: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class StageJob:
    name: str
    inputs: list[InputRef]
    session_conf: dict[str, str]
    output_location: str | None
    """Where to commit the output; None when it is only handed over in memory."""
    output_format: str = "parquet"
    write_options: dict[str, str] = field(default_factory=dict)
    """The writer's options for the output (``parquet.block.size``: row groups its consumers can split)."""
    callable_path: str | None = None
    """A cloudpickled ``fn(spark, **inputs, **kwargs) -> DataFrame``."""
    application: str | None = None
    """A PySpark application file using :mod:`airflow_provider_finegrained.runtime.api`."""
    application_args: list[str] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    handover: bool = False
    """Another stage of the region reads this output in memory: keep the DataFrame for it. Cached only when
    the stage also writes it; otherwise its plan runs inside each reader's Spark jobs, once per reader, with
    that reader's settings (the trace's sizing notes say whose, ``execution.spark_reach``)."""


@dataclass(frozen=True)
class RegionJob:
    region: str
    dag_id: str
    run_id: str
    try_number: int
    storage_root: str
    folder: str
    """Holds the job file, pickled callables and the per-stage status files."""
    stages: list[StageJob]

    def status_path(self, stage: str) -> str:
        return status_path(self.folder, stage)

    def dump(self, *, storage_options: StorageOptions = None) -> str:
        """Write the job as ``job.json`` in its folder; returns that file's location."""
        path = join(self.folder, "job.json")
        write_json(path, asdict(self), storage_options=storage_options)
        return path

    @classmethod
    def load(cls, path: str, *, storage_options: StorageOptions = None) -> RegionJob:
        data = read_json(path, storage_options=storage_options)
        stages = [StageJob(**{**s, "inputs": [InputRef(**i) for i in s["inputs"]]}) for s in data.pop("stages")]
        return cls(**data, stages=stages)


@dataclass(frozen=True)
class StageStatus:
    """What the driver reports for one stage."""

    stage: str
    state: StageState
    output: dict[str, Any] | None = None
    error: str | None = None
    traceback: str | None = None
    started_at: str | None = None
    ended_at: str | None = None
    ready_at: str | None = None
    """When the stage had its session and settings, ready to run Spark work."""
    application_id: str | None = None
    ui_url: str | None = None
    """The application's live UI (the driver's, or the warm pool's)."""
    log: list[str] = field(default_factory=list)
    spark_tasks: dict[str, Any] | None = None
    """Spark's own report of the stage's tasks (``spark_status.StageTaskReport.to_dict``)."""

    def write(self, path: str, *, storage_options: StorageOptions = None) -> None:
        write_json(path, asdict(self), storage_options=storage_options)

    @classmethod
    def read(cls, path: str, *, storage_options: StorageOptions = None) -> StageStatus | None:
        """The status at ``path``, None if the driver has not written it."""
        try:
            data: Mapping[str, Any] = read_json(path, storage_options=storage_options)
        except FileNotFoundError:
            return None
        return cls(**data)


def write_json(path: str, data: Any, *, storage_options: StorageOptions = None) -> None:
    """Write JSON atomically at a location: a reader polling for the file never sees half of it."""
    filesystem.write_json(path, data, storage_options)


def read_json(path: str, *, storage_options: StorageOptions = None) -> Any:
    """The JSON document at a location (a job, a status, a trace); FileNotFoundError if it is missing."""
    return filesystem.read_json(path, storage_options)
