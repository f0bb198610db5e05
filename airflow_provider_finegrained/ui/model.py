"""View models: from the XCom dicts of a run (plan, traces, outputs) to what the pages show.

Pure Python, no Airflow imports: the edge (``ui.store``) reads the database and hands plain dicts here.
Missing data is expected (a stage that failed, was skipped or has not run pushes no trace): every field
is optional and the row says why it is empty.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from airflow_provider_finegrained.execution.executor_lifecycle import lifecycle_text
from airflow_provider_finegrained.planning.history import run_from_trace
from airflow_provider_finegrained.planning.units import format_bytes
from airflow_provider_finegrained.spark.jvm_start import jvm_text

# The keys of a trace's spark_conf never reach a page: it is redacted already, but the page has no use for it.
_HIDDEN_TRACE_KEYS = frozenset({"spark_conf", "config"})


@dataclass(frozen=True)
class RunInput:
    """What the database holds for one DAG run, as plain dicts keyed by stage (task id)."""

    run_id: str
    plan: Mapping[str, Any] | None = None
    traces: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    outputs: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    states: Mapping[str, str | None] = field(default_factory=dict)
    """Task instance state per task id (``success``, ``failed``, ``None`` when not started...)."""
    run_state: str | None = None
    run_after: str | None = None


@dataclass(frozen=True)
class StageRow:
    """One stage of one run, as the run page's table shows it."""

    stage: str
    region: str
    slot_sharing_group: str
    state: str
    """The task's state, or ``no trace`` when it has neither a state nor a trace."""
    has_trace: bool
    input_bytes: int | None
    inputs: dict[str, int]
    decided_parallelism: int | None
    rule: str
    parallelism: int | None
    waves: int | None
    executors: int | None
    executor_cores: int | None
    executor_memory: int | None
    memory_overhead: int | None
    memory_fraction: float | None
    capacity_outcome: str
    capacity_message: str
    carrier: str
    """``warm`` (a session of the warm pool) or ``cold`` (an application of its own); empty when unknown."""
    carrier_reason: str
    output_bytes: int | None
    in_memory_only: bool
    duration_s: float | None
    application_id: str
    learned: dict[str, Any] | None = None
    """The expansion learned from past runs that corrected the decision (work, runs, memory), if any."""
    sizing_notes: list[str] = field(default_factory=list)
    runs_in: str | None = None
    """The in-region consumer whose Spark jobs ran this stage's plan (an in-memory handover)."""
    executors_lifecycle: str = ""
    """How the region's executors come and go (``up to 4, released when idle 30 s``); empty when fixed."""
    jvm: str = ""
    """How its JVMs started (``spark.jvm_start.jvm_text``: the JIT and why, the class-data archive); empty warm."""

    @property
    def learned_text(self) -> str:
        """``work 0.31 · memory 2.4 (5 runs)``, or a dash when no learned factor was used."""
        if not self.learned:
            return "–"
        parts = [f"work {_factor(self.learned.get('work'))}"]
        if self.learned.get("memory") is not None:
            parts.append(f"memory {_factor(self.learned.get('memory'))}")
        return f"{' · '.join(parts)} ({self.learned.get('runs', '?')} runs)"

    @property
    def input_text(self) -> str:
        return _bytes_or_dash(self.input_bytes)

    @property
    def decided_text(self) -> str:
        return "–" if self.decided_parallelism is None else str(self.decided_parallelism)

    @property
    def planned_text(self) -> str:
        if self.parallelism is None:
            return "–"
        return f"{self.parallelism} tasks in {self.waves or 0} wave(s)"

    @property
    def executors_text(self) -> str:
        if self.executors is None:
            return "–"
        text = f"{self.executors} × {self.executor_cores or 0} cores"
        return f"{text} ({self.executors_lifecycle})" if self.executors_lifecycle else text

    @property
    def memory_text(self) -> str:
        if self.executor_memory is None:
            return "–"
        text = format_bytes(self.executor_memory)
        return f"{text} (+{format_bytes(self.memory_overhead)})" if self.memory_overhead else text

    @property
    def fraction_text(self) -> str:
        return "–" if self.memory_fraction is None else f"{self.memory_fraction:.3f}"

    @property
    def output_text(self) -> str:
        if self.in_memory_only:
            return "in memory"
        return _bytes_or_dash(self.output_bytes)

    @property
    def duration_text(self) -> str:
        return format_duration(self.duration_s)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RunView:
    """The run page: the plan and one row per stage."""

    dag_id: str
    run_id: str
    run_state: str | None
    plan: Mapping[str, Any] | None
    rows: list[StageRow]

    def to_json(self) -> dict[str, Any]:
        return {
            "dag_id": self.dag_id,
            "run_id": self.run_id,
            "run_state": self.run_state,
            "plan": self.plan,
            "stages": [row.to_json() for row in self.rows],
        }


@dataclass(frozen=True)
class HistoryPoint:
    """One stage in one past run."""

    run_id: str
    input_bytes: int
    decided_parallelism: int
    duration_s: float | None
    learned_work: float | None = None
    """The learned work factor this run decided with (None: it decided from bytes on disk)."""
    measured_work: float | None = None
    """What this run measured: its largest shuffle read per consumed byte (None: it shuffled nothing)."""


@dataclass(frozen=True)
class HistoryView:
    """The history page: per stage, its points over the runs that traced it (oldest first)."""

    dag_id: str
    runs: list[str]
    stages: dict[str, list[HistoryPoint]]

    def to_json(self) -> dict[str, Any]:
        return {
            "dag_id": self.dag_id,
            "runs": list(self.runs),
            "stages": {stage: [asdict(p) for p in points] for stage, points in self.stages.items()},
        }


def stage_order(plan: Mapping[str, Any] | None, extra: Sequence[str] = ()) -> list[str]:
    """Stages region by region as the plan lists them, then any traced stage the plan does not know."""
    order: list[str] = []
    if plan:
        for region in plan.get("regions", []):
            order.extend(s for s in region.get("stages", []) if s not in order)
        order.extend(s for s in plan.get("stages", {}) if s not in order)
    order.extend(sorted(s for s in extra if s not in order))
    return order


def stage_row(
    stage: str,
    plan_stage: Mapping[str, Any] | None,
    trace: Mapping[str, Any] | None,
    output: Mapping[str, Any] | None,
    state: str | None,
) -> StageRow:
    """The table row of one stage; ``trace`` or ``output`` may be missing (failed or not run)."""
    t: Mapping[str, Any] = trace or {}
    p: Mapping[str, Any] = plan_stage or {}
    o: Mapping[str, Any] = output or {}
    consumed = {str(k): int(v) for k, v in (t.get("consumed_bytes") or {}).items()}
    capacity: Mapping[str, Any] = t.get("capacity") or {}
    execution: Mapping[str, Any] = t.get("execution") or {}
    output_bytes = o.get("total_bytes", t.get("output_bytes"))
    return StageRow(
        stage=stage,
        region=str(t.get("region") or p.get("region") or ""),
        slot_sharing_group=str(t.get("slot_sharing_group") or p.get("slot_sharing_group") or ""),
        state=state or ("no trace" if trace is None else "unknown"),
        has_trace=trace is not None,
        input_bytes=sum(consumed.values()) if trace is not None else None,
        inputs=consumed,
        decided_parallelism=_int(t.get("decided_parallelism")),
        rule=str(t.get("rule") or ""),
        parallelism=_int(t.get("parallelism")),
        waves=_int(t.get("waves")),
        executors=_int(t.get("executors")),
        executor_cores=_int(t.get("executor_cores")),
        executor_memory=_int(t.get("executor_memory")),
        memory_overhead=_int(t.get("memory_overhead")),
        memory_fraction=_float(t.get("memory_fraction", p.get("memory_fraction"))),
        capacity_outcome=str(capacity.get("outcome") or ""),
        capacity_message=str(capacity.get("message") or ""),
        carrier=str(execution.get("mode") or ""),
        carrier_reason=str(execution.get("reason") or ""),
        output_bytes=_int(output_bytes),
        in_memory_only=bool(o.get("in_memory_only")),
        duration_s=duration_s(t.get("started_at"), t.get("ended_at")),
        application_id=str(t.get("application_id") or ""),
        learned=dict(t["learned"]) if isinstance(t.get("learned"), Mapping) else None,
        sizing_notes=[str(n) for n in t.get("sizing_notes") or []],
        runs_in=str(t["runs_in"]) if t.get("runs_in") else None,
        executors_lifecycle=lifecycle_text(t.get("spark_conf") or {}),
        jvm=jvm_text(t.get("jvm") or {}),
    )


def run_view(dag_id: str, run: RunInput) -> RunView:
    """Every stage the plan knows (traced or not) plus every traced stage, in plan order."""
    plan_stages: Mapping[str, Any] = (run.plan or {}).get("stages", {})
    names = stage_order(run.plan, [*run.traces, *run.outputs])
    rows = [
        stage_row(name, plan_stages.get(name), run.traces.get(name), run.outputs.get(name), run.states.get(name))
        for name in names
    ]
    return RunView(dag_id=dag_id, run_id=run.run_id, run_state=run.run_state, plan=run.plan, rows=rows)


def history_view(dag_id: str, runs: Sequence[RunInput]) -> HistoryView:
    """Points per stage over ``runs`` (given newest first, as the database returns them)."""
    oldest_first = list(reversed(runs))
    latest_plan = next((r.plan for r in runs if r.plan), None)
    names = stage_order(latest_plan, [s for r in runs for s in r.traces])
    stages: dict[str, list[HistoryPoint]] = {name: [] for name in names}
    for run in oldest_first:
        for name, trace in run.traces.items():
            decided = _int(trace.get("decided_parallelism"))
            if decided is None:
                continue
            consumed = trace.get("consumed_bytes") or {}
            measured = run_from_trace(trace, run.run_id, succeeded=True)
            stages[name].append(
                HistoryPoint(
                    run_id=run.run_id,
                    input_bytes=sum(int(v) for v in consumed.values()),
                    decided_parallelism=decided,
                    duration_s=duration_s(trace.get("started_at"), trace.get("ended_at")),
                    learned_work=measured.learned_work,
                    measured_work=measured.work_ratio if measured.ignored_because() is None else None,
                )
            )
    return HistoryView(dag_id=dag_id, runs=[r.run_id for r in oldest_first], stages=stages)


def public_trace(trace: Mapping[str, Any]) -> dict[str, Any]:
    """A trace without the Spark settings it ran with (kept out of the UI and its API)."""
    return {k: v for k, v in trace.items() if k not in _HIDDEN_TRACE_KEYS}


def duration_s(started_at: Any, ended_at: Any) -> float | None:
    """Seconds between two ISO timestamps; ``None`` when either is missing or unreadable."""
    if not started_at or not ended_at:
        return None
    try:
        start = datetime.fromisoformat(str(started_at))
        end = datetime.fromisoformat(str(ended_at))
        return max(0.0, (end - start).total_seconds())
    except (TypeError, ValueError):
        return None


def format_duration(seconds: float | None) -> str:
    """``None -> '–'``, ``4.25 -> '4.2 s'``, ``125 -> '2 min 5 s'``."""
    if seconds is None:
        return "–"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s"


def _bytes_or_dash(n: int | None) -> str:
    return "–" if n is None else format_bytes(n)


def _factor(value: Any) -> str:
    number = _float(value)
    return "?" if number is None else f"{number:.3g}"


def _int(value: Any) -> int | None:
    if value is None or value == "":
        return None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _float(value: Any) -> float | None:
    if value is None or value == "":
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
