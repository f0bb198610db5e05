"""What a region run uses of Airflow's objects, and the records it hands back and carries through a deferral."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from airflow_provider_finegrained.contract import OutputRecord, StageTrace
from airflow_provider_finegrained.execution.region_job import StageTaskLike
from airflow_provider_finegrained.launchers.base import LogLike

__all__ = [
    "LeaderLike",
    "LiveLinkLike",
    "RunContext",
    "RunFacts",
    "RunReport",
    "StateStoreLike",
    "Succeeded",
    "TaskInstanceLike",
    "member_context",
]


# -- what the run uses of Airflow's objects ---------------------------------------------------------------


class TaskInstanceLike(Protocol):
    """The task instance calls a region run makes."""

    try_number: int

    def xcom_push(self, key: str, value: Any) -> None: ...

    def xcom_pull(self, task_ids: str, key: str) -> Any: ...


class StateStoreLike(Protocol):
    """The task state store calls a region run makes (``context["task_state_store"]``, Airflow 3.3)."""

    def get(self, key: str, default: Any = None) -> Any: ...

    def set(self, key: str, value: Any) -> None: ...

    def delete(self, key: str) -> None: ...


class LeaderLike(StageTaskLike, Protocol):
    """The region's leader: the running stage task that runs the region."""

    @property
    def log(self) -> LogLike: ...
    @property
    def dag(self) -> Any:
        """The DAG (``dag_id``, ``get_task``); Airflow types it as optional."""

    @property
    def submit_timeout(self) -> float | None: ...


class LiveLinkLike(Protocol):
    """Follows the application's output for the live Spark UI link (``operators.links.LiveLink``)."""

    def on_line(self, line: str) -> None: ...

    def on_application(self, application_id: str) -> None: ...


class RunReport(Protocol):
    """What the run reports to its leader's task while it runs (``operators.task_report.TaskReport``)."""

    def live_link(self, ui_links: Callable[[str | None, str | None], Any]) -> LiveLinkLike: ...

    def region_info(self, region: str, folder: str, leader: str, try_number: int, stages: Sequence[str]) -> None: ...

    def lineage_conf(self, conf: Mapping[str, str]) -> dict[str, str]: ...


@dataclass(frozen=True)
class RunContext:
    """The task context's parts a region run uses."""

    ti: TaskInstanceLike
    run_id: str
    try_number: int
    raw: Mapping[str, Any]
    """The whole context, for rendering the other members' templates."""
    state_store: StateStoreLike | None = None
    """Survives the task's retries; None where Airflow offers none (then nothing can be reattached)."""

    @classmethod
    def of(cls, context: Mapping[str, Any]) -> RunContext:
        ti = context["ti"]
        return cls(ti, str(context["run_id"]), int(ti.try_number), context, context.get("task_state_store"))


def member_context(context: Mapping[str, Any], task: Any) -> dict[str, Any]:
    """The leader's template context made ``task``'s own, for rendering a region member's templates.

    What depends on the task is the member's: ``task``, ``params`` (the DAG's, the member's, the run's
    conf), ``inlets``/``outlets``, ``task_instance_key_str`` and ``ti``/``task_instance`` (a copy of the
    leader's whose ``task_id``, ``task`` and ``map_index`` are the member's; its try number stays the
    leader's, the try whose application runs the member). The leader's task state store is left out: a
    member's own is not reachable from the leader's process.
    """
    from airflow.sdk.definitions.param import process_params

    leader_ti = context["ti"]
    dag = context.get("dag") or task.dag
    dag_run = context.get("dag_run")
    own: dict[str, Any] = {k: v for k, v in context.items() if k != "task_state_store"}
    ti = _member_ti(leader_ti, task)
    own.update(
        task=task,
        ti=ti,
        task_instance=ti,
        inlets=task.inlets,
        outlets=task.outlets,
        map_index_template=getattr(task, "map_index_template", None),
        params=process_params(dag, task, getattr(dag_run, "conf", None), suppress_exception=False),
    )
    key = context.get("task_instance_key_str")
    prefix = f"{task.dag_id}__{leader_ti.task_id}__"
    if isinstance(key, str) and key.startswith(prefix):
        own["task_instance_key_str"] = f"{task.dag_id}__{task.task_id}__{key[len(prefix) :]}"
    return own


def _member_ti(leader_ti: Any, task: Any) -> Any:
    """The leader's task instance as the member's: Airflow's runtime task instance is a pydantic model."""
    if not hasattr(leader_ti, "model_copy"):
        return leader_ti
    ti = leader_ti.model_copy(update={"task_id": task.task_id, "task": task, "map_index": -1})
    if hasattr(ti, "_cached_template_context"):
        ti._cached_template_context = None  # built anew from the member's task if a template asks for it
    return ti


@dataclass(frozen=True)
class Succeeded:
    """The region ran: what the leader publishes, each stage's committed output (stages that succeeded) and trace."""

    records: dict[str, OutputRecord]
    traces: dict[str, StageTrace]


@dataclass(frozen=True)
class RunFacts:
    """What the submitting leader knew of its run that the trace needs, carried through a deferral."""

    carrier: dict[str, Any]
    capacity: dict[str, Any] = field(default_factory=dict)
    reduced_to_executors: int | None = None
    timings: dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunFacts:
        reduced = data.get("reduced_to_executors")
        return cls(
            dict(data.get("carrier") or {}),
            dict(data.get("capacity") or {}),
            None if reduced is None else int(reduced),
            {str(k): float(v) for k, v in (data.get("timings") or {}).items()},
        )
