"""Every touch of a region run's storage, in one class: the run's folder, its stages' folders, the files in it.

The region folder (``<root>/<dag>/<run>/_regions/<region>/try=<n>``) holds the job file, the pickled
stage callables, each stage's status (written by the driver) and trace (written here). Every call goes
through the storage layer with the connection's storage options, so the root may be any fsspec URL
(``file://``, ``s3://``, ``hdfs://``, ...). No Airflow imports.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from airflow_provider_finegrained.runtime.job import StageStatus, status_path, trace_path, write_json
from airflow_provider_finegrained.runtime.output import (
    cleanup_uncommitted,
    ensure_inside_root,
    output_location,
    read_committed,
    stage_folder,
)
from airflow_provider_finegrained.storage import filesystem
from airflow_provider_finegrained.storage.locations import join, region_folder

if TYPE_CHECKING:
    from airflow_provider_finegrained.contract import StageTrace
    from airflow_provider_finegrained.runtime.job import RegionJob
    from airflow_provider_finegrained.runtime.output import CommittedOutput


class RegionFolder:
    """One try of one region: its folder under the storage root, and its stages' output folders."""

    def __init__(
        self,
        root: str,
        dag_id: str,
        run_id: str,
        region: str,
        try_number: int,
        storage_options: dict[str, Any] | None = None,
    ) -> None:
        self.root = root
        self.dag_id = dag_id
        self.run_id = run_id
        self.try_number = try_number
        self.storage_options = storage_options or {}
        self.path = region_folder(root, dag_id, run_id, region, try_number)

    def reset(self, stages: list[str]) -> None:
        """An empty folder for this try, and no uncommitted leftovers in the stages' output folders."""
        # An earlier attempt with this try number may have been killed before it ended.
        filesystem.reset_folder(self.path, self.storage_options)
        for stage in stages:
            cleanup_uncommitted(
                stage_folder(self.root, self.dag_id, self.run_id, stage), storage_options=self.storage_options
            )

    def write_callable(self, stage: str, data: bytes) -> str:
        """Store a stage's pickled callable for the driver; returns its location."""
        location = join(self.path, f"callable-{stage}.pkl")
        filesystem.write_bytes(location, data, self.storage_options)
        return location

    def write_job(self, job: RegionJob) -> str:
        """Store the region job for the driver; returns its location."""
        return job.dump(storage_options=self.storage_options)

    def read_status(self, stage: str) -> StageStatus | None:
        """What the driver recorded for a stage; None when it recorded nothing."""
        return StageStatus.read(status_path(self.path, stage), storage_options=self.storage_options)

    def write_trace(self, trace: StageTrace) -> None:
        """The stage's trace, where the region's other tasks read it."""
        write_json(trace_path(self.path, trace.stage), trace.to_xcom(), storage_options=self.storage_options)

    def output_location(self, stage: str, output_path: str | None) -> str:
        """Where a stage commits its output: its ``output_path`` (inside the root) or the default location."""
        if output_path:
            try:
                return ensure_inside_root(self.root, output_path)
            except ValueError as exc:
                raise ValueError(
                    f"stage {stage!r}: output_path {output_path!r} is outside the storage root {self.root!r}; "
                    "give a path inside it or leave output_path unset"
                ) from exc
        return output_location(self.root, self.dag_id, self.run_id, stage, self.try_number)

    def read_committed(self, location: str) -> CommittedOutput:
        """An upstream stage's committed output (OutputError when it is not readable)."""
        return read_committed(location, storage_options=self.storage_options)
