"""Where a stage's past runs are kept for learning: one small JSON object per run under the storage root.

``<storage_root>/_history/<dag_id>/<stage_id>/<ended>__<run_id>.json``, one :class:`StageRun` each.

Why the storage root (docs/history.md): Airflow 3 task processes have no metadata-database access, so a
table of the provider's own could only be written through an API the Task SDK does not offer; XCom of
past runs is readable from a worker only one (dag run, task) at a time through the execution API and
goes away with the runs Airflow's cleanup deletes. The storage root is reachable from every worker and
every driver already, needs no new service, and its objects outlive the dag runs. Each run writes its
own object (created once, never read-modify-written), so concurrent runs of one DAG cannot corrupt it;
a rerun of a run (cleared task) writes a newer object and the reader keeps the newest per run id.

No Airflow imports.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airflow_provider_finegrained.contract import StageTrace
from airflow_provider_finegrained.planning.expansion import LearnedExpansion
from airflow_provider_finegrained.planning.history import WINDOW, Learning, StageRun, learn_expansion, run_from_trace
from airflow_provider_finegrained.storage import filesystem
from airflow_provider_finegrained.storage.locations import join, sanitize_component

if TYPE_CHECKING:
    from airflow_provider_finegrained.settings import ConnectionSettings

HISTORY_FOLDER = "_history"
READ_LIMIT = 3 * WINDOW
"""Objects read per stage, newest first: enough for a window of usable runs among failed or in-memory ones."""

log = logging.getLogger(__name__)


def stage_run(trace: StageTrace, run_id: str, succeeded: bool) -> StageRun:
    """What one run of a stage leaves for learning, from its complete trace (Spark's report included)."""
    return run_from_trace(trace.to_xcom(), run_id, succeeded)


class HistoryStore:
    """The past runs of one DAG's stages under a storage root."""

    def __init__(self, root: str, dag_id: str, storage_options: Mapping[str, Any] | None = None) -> None:
        self.root = root
        self.dag_id = dag_id
        self.storage_options = dict(storage_options or {})

    def folder(self, stage: str) -> str:
        return join(
            self.root,
            HISTORY_FOLDER,
            sanitize_component(self.dag_id, "dag_id"),
            sanitize_component(stage, "stage_id"),
        )

    def record(self, stage: str, run: StageRun) -> str:
        """Write ``run`` as its own object (named by when it ended and its run id); returns the location."""
        stamp = datetime.fromisoformat(run.ended_at).astimezone(UTC).strftime("%Y%m%dT%H%M%S%fZ")
        location = join(self.folder(stage), f"{stamp}__{sanitize_component(run.run_id, 'run_id')}.json")
        filesystem.write_json(location, run.to_dict(), self.storage_options)
        return location

    def runs(self, stage: str, limit: int = READ_LIMIT) -> list[StageRun]:
        """The stage's recorded runs, newest first, the newest record per run id; unreadable objects skipped."""
        folder = self.folder(stage)
        names = sorted(
            (name for name, is_folder in filesystem.list_folder(folder, self.storage_options) if not is_folder),
            reverse=True,
        )
        found: dict[str, StageRun] = {}
        for name in names[:limit]:
            try:
                run = StageRun.from_dict(filesystem.read_json(join(folder, name), self.storage_options))
            except (OSError, ValueError, TypeError, json.JSONDecodeError) as exc:
                log.warning("history of stage %r: skipping %s (%s)", stage, name, exc)
                continue
            if run.run_id not in found:
                found[run.run_id] = run
        return list(found.values())

    def learn(self, stage: str, min_runs: int, exclude_run: str | None = None) -> Learning:
        """What the stage's past runs teach (a rerun of ``exclude_run`` does not learn from itself)."""
        return learn_expansion([r for r in self.runs(stage) if r.run_id != exclude_run], min_runs)


class RegionHistory:
    """A region run's use of the history: learn once before deciding, record each member after the run.

    Best effort both ways: an unreadable history decides from bytes on disk, a failed write loses one lesson;
    both are logged. ``enabled=False`` (``learn_from_history``) neither reads nor writes.
    """

    def __init__(
        self, store: HistoryStore, *, enabled: bool, min_runs: int, run_id: str, log: logging.Logger | Any
    ) -> None:
        self.store = store
        self.enabled = enabled
        self.min_runs = min_runs
        self.run_id = run_id
        self.log = log
        self._learned: dict[str, LearnedExpansion] | None = None

    @classmethod
    def for_run(
        cls, settings: ConnectionSettings, dag_id: str, run_id: str, storage_options: Mapping[str, Any], log: Any
    ) -> RegionHistory:
        """The history of ``dag_id``'s stages under the connection's storage root, as its settings ask."""
        store = HistoryStore(settings.storage_root, dag_id, storage_options)
        on, runs = settings.learn_from_history, settings.history_min_runs
        return cls(store, enabled=on, min_runs=runs, run_id=run_id, log=log)

    def learned(self, stages: Iterable[str]) -> dict[str, LearnedExpansion]:
        """Per stage that has one, the expansion its past runs teach (read once; a rerun of this run excluded)."""
        if self._learned is not None:
            return self._learned
        self._learned = {}
        if not self.enabled:
            return self._learned
        for stage in stages:
            try:
                learning = self.store.learn(stage, self.min_runs, exclude_run=self.run_id)
            except (OSError, ValueError) as exc:
                self.log.warning("History of stage %s is unreadable; deciding from bytes on disk (%s)", stage, exc)
                continue
            self.log.info("History of stage %s: %s", stage, learning.note)
            if learning.expansion is not None:
                self._learned[stage] = learning.expansion
        return self._learned

    def record(self, traces: Mapping[str, StageTrace], succeeded: Mapping[str, bool]) -> None:
        """Each stage's run as one new object of its history."""
        if not self.enabled:
            return
        for stage, trace in traces.items():
            try:
                self.store.record(stage, stage_run(trace, self.run_id, succeeded.get(stage, False)))
            except (OSError, ValueError) as exc:
                self.log.warning("Stage %s: its run was not added to the history (%s)", stage, exc)
