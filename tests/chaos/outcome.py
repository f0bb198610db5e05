"""What one kill trial found, and whether it passed: pure data and rules, no Airflow or Spark."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

EXPECTED_ROWS = 20
"""Rows the slow stage writes (trial_dag.py); every committed output and the consumer must hold exactly these."""

REGION = "region"
"""The mode without Airflow (region.py): a stand-in task runs one region and is killed; no DAG run, no output."""

# Failure classes, in the order the table shows them. A trial passes when it has none of FAILING.
NOT_KILLED = "not_killed"
ORPHAN_PROCESS = "orphan_process"
ORPHAN_JOB = "orphan_job"
INCOMPLETE_COMMIT = "incomplete_commit"
KILLED_TRY_PUBLISHED = "killed_try_published"
RETRY_FAILED = "retry_failed"
DOWNSTREAM_ROWS = "downstream_rows"
FAILING = (
    NOT_KILLED,
    ORPHAN_PROCESS,
    ORPHAN_JOB,
    INCOMPLETE_COMMIT,
    KILLED_TRY_PUBLISHED,
    RETRY_FAILED,
    DOWNSTREAM_ROWS,
)
LEFTOVER_STAGING = "leftover_staging"
"""Not failing: uncommitted files the killed try left once the run ended (readers ignore them); region mode: the
launcher's secret properties file left behind."""

MEANING = {
    NOT_KILLED: "the harness never reached the kill moment (the stage's Spark job never started writing, or no "
    "task process was found; region mode: the stand-in task ended on its own): the trial proves nothing",
    ORPHAN_PROCESS: "a process of the killed try (spark-submit JVM, Python driver, PySpark worker; region mode: of "
    "the stand-in task's region) was still alive 15 s after the kill",
    ORPHAN_JOB: "warm mode: a Spark job of the killed try's Connect session was still running in the pool 15 s "
    "after the kill",
    INCOMPLETE_COMMIT: "a _COMMITTED marker lists files that are missing or of another size, or claims rows that "
    "differ from the rows in its files or from the 20 the stage writes",
    KILLED_TRY_PUBLISHED: "the killed try (try 1) published a _COMMITTED marker after it was killed: a second "
    "committed output for one stage in one run (fencing should refuse it)",
    RETRY_FAILED: "the DAG run or the retry of the slow stage did not end in success",
    DOWNSTREAM_ROWS: "the consumer stage did not commit exactly the 20 rows of the slow stage",
    LEFTOVER_STAGING: "(not failing) uncommitted staging files of the killed try were left in the stage folder "
    "after the run ended; region mode: the launcher's secret properties file was left in the task's temp folder "
    "(spark-submit killed before its application was named)",
}


@dataclass(frozen=True)
class MarkerCheck:
    """One ``_COMMITTED`` marker of the slow stage, checked against the files it lists."""

    location: str
    """The marker's folder relative to the stage folder, e.g. ``try=1``."""
    try_number: int
    claimed_rows: int
    listed_files: int
    missing_files: list[str] = field(default_factory=list)
    size_mismatches: list[str] = field(default_factory=list)
    rows_in_files: int | None = None
    """Rows in the listed files that exist, from their footers; None when none could be read."""
    error: str | None = None
    """Why the marker could not be read at all."""

    def complete(self, expected_rows: int = EXPECTED_ROWS) -> bool:
        """Every listed file there with its size, and the rows claimed = the rows in the files = expected."""
        return (
            self.error is None
            and not self.missing_files
            and not self.size_mismatches
            and self.claimed_rows == self.rows_in_files == expected_rows
        )

    def describe(self, expected_rows: int = EXPECTED_ROWS) -> str:
        """A short account for the table: ``try=1: 10/20 rows, 5 files missing``."""
        if self.error is not None:
            return f"{self.location}: unreadable ({self.error})"
        text = f"{self.location}: claims {self.claimed_rows}/{expected_rows} rows"
        if self.rows_in_files != self.claimed_rows:
            text += f", files hold {self.rows_in_files}"
        if self.missing_files:
            text += f", {len(self.missing_files)} of {self.listed_files} files missing"
        if self.size_mismatches:
            text += f", {len(self.size_mismatches)} sizes differ"
        return text


@dataclass(frozen=True)
class ProcessInfo:
    """A process the harness killed or found alive."""

    pid: int
    role: str
    """``task runner``, ``stand-in task`` (region mode), ``spark-submit JVM``, ``python driver``, ``pyspark worker``,
    ``other``."""
    cmdline: str
    """Shortened, for the record (never holds a real secret: the trial DAG sets none, the region trial's are
    made-up values)."""


@dataclass
class TrialRecord:
    """Everything one trial observed; :func:`classify` turns it into failure classes."""

    mode: str
    trial: int
    run_id: str
    killed: ProcessInfo | None = None
    kill_moment: str = ""
    """What was seen when the kill was sent (the attempt folder, how many files were written)."""
    seconds_to_kill: float | None = None
    """From the trigger to the kill."""
    killed_tree: list[ProcessInfo] = field(default_factory=list)
    """The killed task runner's descendants just before the kill."""
    orphans: list[ProcessInfo] = field(default_factory=list)
    orphan_jobs: list[int] = field(default_factory=list)
    killed_try_jobs: list[int] = field(default_factory=list)
    """Warm mode: the Spark jobs of the killed try running in the pool at the kill."""
    markers: list[MarkerCheck] = field(default_factory=list)
    leftovers: list[str] = field(default_factory=list)
    run_state: str | None = None
    slow_tries: dict[int, str] = field(default_factory=dict)
    """The slow stage's state per try number."""
    downstream_rows: int | None = None
    seconds_to_finish: float | None = None
    """From the kill to the DAG run's end."""
    load_before: float | None = None
    load_after: float | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready, with the classes this trial failed on."""
        data = asdict(self)
        data["slow_tries"] = {str(k): v for k, v in self.slow_tries.items()}
        data["failures"] = classify(self)
        data["passed"] = passed(self)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrialRecord:
        """Inverse of :meth:`to_dict` (derived fields are dropped)."""
        fields = {k: v for k, v in data.items() if k not in ("failures", "passed")}
        killed = fields.get("killed")
        fields["killed"] = ProcessInfo(**killed) if killed else None
        fields["killed_tree"] = [ProcessInfo(**p) for p in fields.get("killed_tree", [])]
        fields["orphans"] = [ProcessInfo(**p) for p in fields.get("orphans", [])]
        fields["markers"] = [MarkerCheck(**m) for m in fields.get("markers", [])]
        fields["slow_tries"] = {int(k): v for k, v in fields.get("slow_tries", {}).items()}
        return cls(**fields)


def classify(record: TrialRecord, expected_rows: int = EXPECTED_ROWS) -> list[str]:
    """The failure classes of one trial (FAILING ones first, then LEFTOVER_STAGING), empty when all is well."""
    if record.killed is None:
        return [NOT_KILLED]
    found: list[str] = []
    if record.orphans:
        found.append(ORPHAN_PROCESS)
    if record.orphan_jobs:
        found.append(ORPHAN_JOB)
    if record.mode != REGION:  # a region trial has no DAG run: no output, no retry, no consumer
        found += _run_failures(record, expected_rows)
    if record.leftovers:
        found.append(LEFTOVER_STAGING)
    return found


def _run_failures(record: TrialRecord, expected_rows: int) -> list[str]:
    """What the DAG run's outputs and tries say: the markers of the slow stage, its retry, the consumer's rows."""
    found: list[str] = []
    if any(not marker.complete(expected_rows) for marker in record.markers):
        found.append(INCOMPLETE_COMMIT)
    if any(marker.try_number == 1 for marker in record.markers):
        found.append(KILLED_TRY_PUBLISHED)
    retry = max(record.slow_tries) if record.slow_tries else 0
    if record.run_state != "success" or retry < 2 or record.slow_tries.get(retry) != "success":
        found.append(RETRY_FAILED)
    if record.downstream_rows != expected_rows:
        found.append(DOWNSTREAM_ROWS)
    return found


def passed(record: TrialRecord, expected_rows: int = EXPECTED_ROWS) -> bool:
    """No orphan, no incomplete or late commit, the retry succeeded and downstream read the 20 rows (a region
    trial: the stand-in was killed and no process of its region outlived it)."""
    return not any(name in FAILING for name in classify(record, expected_rows))
