"""The Airflow edge of the UI: reads runs, task states and the stages' XComs from the metadata database.

Returns :class:`~airflow_provider_finegrained.ui.model.RunInput` values (plain dicts) for the pure
view models. Traces lose their Spark settings here, so nothing below this module ever sees them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from airflow_provider_finegrained.contract import OUTPUT_KEY, PLAN_KEY, TRACE_KEY
from airflow_provider_finegrained.ui.model import RunInput, public_trace


class RunNotFound(LookupError):
    """No such DAG run."""


def _iso(value: Any) -> str | None:
    return value.isoformat() if value is not None else None


def _xcoms(session: Any, dag_id: str, run_ids: Iterable[str], keys: Iterable[str]) -> list[Any]:
    from airflow.models.xcom import XComModel
    from sqlalchemy import select

    query = select(XComModel).where(
        XComModel.dag_id == dag_id,
        XComModel.run_id.in_(list(run_ids)),
        XComModel.key.in_(list(keys)),
        XComModel.map_index == -1,
    )
    return list(session.scalars(query))


def _value(row: Any) -> Any:
    from airflow.models.xcom import XComModel

    return XComModel.deserialize_value(row)


def load_run(dag_id: str, run_id: str) -> RunInput:
    """One run with its plan, every stage's trace and output, and every task's state."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        run = session.scalars(select(DagRun).where(DagRun.dag_id == dag_id, DagRun.run_id == run_id)).first()
        if run is None:
            raise RunNotFound(f"DAG {dag_id!r} has no run {run_id!r}")
        states = {
            ti.task_id: (str(ti.state) if ti.state is not None else None)
            for ti in session.scalars(
                select(TaskInstance).where(
                    TaskInstance.dag_id == dag_id, TaskInstance.run_id == run_id, TaskInstance.map_index == -1
                )
            )
        }
        plan: dict[str, Any] | None = None
        traces: dict[str, dict[str, Any]] = {}
        outputs: dict[str, dict[str, Any]] = {}
        for row in _xcoms(session, dag_id, [run_id], [PLAN_KEY, TRACE_KEY, OUTPUT_KEY]):
            value = _value(row)
            if not isinstance(value, dict):
                continue
            if row.key == PLAN_KEY:
                plan = value
            elif row.key == TRACE_KEY:
                traces[row.task_id] = public_trace(value)
            else:
                outputs[row.task_id] = value
        if plan is None:
            plan = _latest_plan(session, dag_id)
        return RunInput(
            run_id=run_id,
            plan=plan,
            traces=traces,
            outputs=outputs,
            states=states,
            run_state=str(run.state) if run.state is not None else None,
            run_after=_iso(run.run_after),
        )


def _latest_plan(session: Any, dag_id: str) -> dict[str, Any] | None:
    """A run that has not started a stage has no plan of its own: show the DAG's latest one."""
    from airflow.models.xcom import XComModel
    from sqlalchemy import select

    row = session.scalars(
        select(XComModel)
        .where(XComModel.dag_id == dag_id, XComModel.key == PLAN_KEY)
        .order_by(XComModel.timestamp.desc())
        .limit(1)
    ).first()
    value = _value(row) if row is not None else None
    return value if isinstance(value, dict) else None


def load_history(dag_id: str, limit: int) -> list[RunInput]:
    """The latest ``limit`` runs of ``dag_id`` (newest first) with their stages' traces."""
    from airflow.models.dagrun import DagRun
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        latest = select(DagRun).where(DagRun.dag_id == dag_id).order_by(DagRun.run_after.desc()).limit(limit)
        runs = list(session.scalars(latest))
        traces: dict[str, dict[str, dict[str, Any]]] = {r.run_id: {} for r in runs}
        for row in _xcoms(session, dag_id, traces, [TRACE_KEY]):
            value = _value(row)
            if isinstance(value, dict):
                traces[row.run_id][row.task_id] = public_trace(value)
        plan = _latest_plan(session, dag_id)
        return [
            RunInput(
                run_id=r.run_id,
                plan=plan if i == 0 else None,
                traces=traces[r.run_id],
                run_state=str(r.state) if r.state is not None else None,
                run_after=_iso(r.run_after),
            )
            for i, r in enumerate(runs)
        ]
