"""Every touch of a region run's storage, in one class: the run's folder, its stages' folders, the files in it.

The region folder (``<root>/<dag>/<run>/_regions/<region>/try=<n>``) holds the job file, the pickled
stage callables, each stage's status (written by the driver) and trace (written here). Every call goes
through the storage layer with the connection's storage options, so the root may be any fsspec URL
(``file://``, ``s3://``, ``hdfs://``, ...). No Airflow imports.
"""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING, Any

from airflow_provider_finegrained.runtime.fence import Fence
from airflow_provider_finegrained.runtime.job import StageStatus, status_path, trace_path, write_json
from airflow_provider_finegrained.runtime.output import (
    ensure_inside_root,
    output_location,
    read_committed,
    stage_folder,
)
from airflow_provider_finegrained.runtime.output_cleanup import cleanup_uncommitted
from airflow_provider_finegrained.storage import filesystem
from airflow_provider_finegrained.storage.errors import StorageConfigError
from airflow_provider_finegrained.storage.locations import (
    REGIONS_FOLDER,
    join,
    normalize_root,
    output_path_allowed,
    output_path_problem,
    redact,
    region_folder,
    root_relative,
)

if TYPE_CHECKING:
    from airflow_provider_finegrained.contract import StageTrace
    from airflow_provider_finegrained.runtime.job import RegionJob
    from airflow_provider_finegrained.runtime.output import CommittedOutput


DAG_FOLDER_PROBES = 20
"""Folders of ``<root>/<name>`` looked into for a DAG's runs before an output_path is let in there."""


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
        """Take the stages over for this try: revoke older tries, then an empty folder and no leftovers.

        Each stage's fence is raised to this try's number BEFORE anything is cleaned, so an older try
        still running somewhere (an orphaned driver, a cluster-mode application) can no longer publish
        into what is cleaned; what it writes after that is never read and is removed by the next try.
        An unwritable root fails here, naming ``storage_root``, the location and the stages.
        """
        try:
            for stage in stages:
                self.fence(stage).raise_to_token(self.storage_options)
            # An earlier attempt with this try number may have been killed before it ended.
            filesystem.reset_folder(self.path, self.storage_options)
            self.sweep(stages)
        except PermissionError as exc:
            raise StorageConfigError(self._unwritable(stages, exc)) from exc
        except OSError as exc:
            if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR, errno.EEXIST):
                raise
            raise StorageConfigError(self._unwritable(stages, exc)) from exc

    def _unwritable(self, stages: list[str], exc: OSError) -> str:
        where = f" ({redact(exc.filename)})" if isinstance(exc.filename, str) else ""
        return (
            f"storage_root {redact(self.root)!r} cannot be written for stage(s) {', '.join(map(repr, stages))}: "
            f"{exc.strerror or exc}{where}; set the connection's storage_root (or [finegrained] storage_root) "
            "to a location this worker and Spark can write"
        )

    def sweep(self, stages: list[str]) -> list[str]:
        """After this try committed: remove what revoked tries wrote since :meth:`reset` (a late writer's
        attempt folders, its superseded markers); returns the removed locations."""
        removed: list[str] = []
        for stage in stages:
            removed += cleanup_uncommitted(
                stage_folder(self.root, self.dag_id, self.run_id, stage), storage_options=self.storage_options
            )
        return removed

    def fence(self, stage: str) -> Fence:
        """The fencing token this try holds for a stage's outputs."""
        return Fence.for_stage(self.root, self.dag_id, self.run_id, stage, self.try_number)

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
        """Where a stage commits its output: its ``output_path`` or the default location.

        An ``output_path`` (rendered, relative to the root or absolute) must lie in the user's part of the
        root (storage.locations.output_path_problem), and not in a folder holding another DAG's runs, which
        only the storage knows. ``""`` is the root itself, not "unset" (that is None).
        """
        if output_path is None:
            return output_location(self.root, self.dag_id, self.run_id, stage, self.try_number)
        allowed = output_path_allowed(self.dag_id)
        try:
            location = ensure_inside_root(self.root, output_path)
        except ValueError as exc:
            raise ValueError(
                f"stage {stage!r}: output_path {redact(output_path)!r} is outside the storage root "
                f"{redact(self.root)!r}; {allowed}"
            ) from exc
        relative = root_relative(self.root, location)
        problem = output_path_problem(relative, self.dag_id)
        if problem is None and self._holds_dag_runs(relative.split("/")[0]):
            problem = f"is inside {relative.split('/')[0]!r}, a folder holding runs of another DAG"
        if problem is not None:
            raise ValueError(f"stage {stage!r}: output_path {redact(output_path)!r} {problem}; {allowed}")
        return location

    def _holds_dag_runs(self, name: str) -> bool:
        """Whether ``<root>/<name>`` is a DAG's folder: some run folder in it holds ``_regions``.

        Every run of a DAG's stages leaves ``<root>/<dag>/<run>/_regions``; a DAG folder holds little else, so
        its first few folders tell (a bound keeps a large export folder cheap to look at on an object store).
        """
        folder = join(normalize_root(self.root), name)
        subfolders = [n for n, is_folder in filesystem.list_folder(folder, self.storage_options) if is_folder]
        return any(
            filesystem.exists(join(folder, sub, REGIONS_FOLDER), self.storage_options)
            for sub in subfolders[:DAG_FOLDER_PROBES]
        )

    def read_committed(self, location: str) -> CommittedOutput:
        """An upstream stage's committed output (OutputError when it is not readable)."""
        return read_committed(location, storage_options=self.storage_options)
