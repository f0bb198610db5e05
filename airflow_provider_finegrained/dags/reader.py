"""Turn an Airflow DAG's stage tasks into the planning graph and plan it.

The seam: a task is a stage when it carries a :class:`~airflow_provider_finegrained.planning.StageSpec`
in its ``stage_spec`` attribute (``SparkStageOperator`` and the ``@task.spark_stage`` decorator set
it). Inputs name upstream stages by task id. Everything here runs at parse time.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from airflow_provider_finegrained.dags.declaration import declares_all_sources_in_one_region
from airflow_provider_finegrained.planning import DagPlan, StageGraphError, StageSpec, plan_stages
from airflow_provider_finegrained.storage.locations import (
    RESERVED_FOLDERS,
    dag_folder_name,
    output_path_allowed,
    output_path_problem,
    relative_output_path,
)

STAGE_ATTRIBUTE = "stage_spec"


@runtime_checkable
class StageTask(Protocol):
    """What the reader needs of a stage task."""

    task_id: str
    stage_spec: StageSpec


def is_stage(task: Any) -> bool:
    return isinstance(getattr(task, STAGE_ATTRIBUTE, None), StageSpec)


def has_stages(dag: Any) -> bool:
    return any(is_stage(task) for task in dag.tasks)


def stage_specs(dag: Any) -> list[StageSpec]:
    """The DAG's stage declarations, checked against its tasks and dependencies."""
    tasks = {task.task_id: task for task in dag.tasks}
    _check_names(dag)
    _check_output_paths(dag)
    specs: list[StageSpec] = []
    for task in dag.tasks:
        if not is_stage(task):
            continue
        spec: StageSpec = getattr(task, STAGE_ATTRIBUTE)
        if spec.name != task.task_id:
            raise StageGraphError(f"task {task.task_id!r} declares a stage named {spec.name!r}; they must match")
        for stage_input in spec.inputs:
            upstream = tasks.get(stage_input.upstream)
            if upstream is None:
                raise StageGraphError(
                    f"stage {spec.name!r} reads input {stage_input.input_name!r} from "
                    f"{stage_input.upstream!r}, which is not a task of DAG {dag.dag_id!r}"
                )
            if not is_stage(upstream):
                raise StageGraphError(
                    f"stage {spec.name!r} reads input {stage_input.input_name!r} from "
                    f"{stage_input.upstream!r}, a {type(upstream).__name__} task that is not a stage; "
                    "only stages publish outputs a stage can read"
                )
            if stage_input.upstream not in task.get_flat_relative_ids(upstream=True):
                raise StageGraphError(
                    f"stage {spec.name!r} reads from {stage_input.upstream!r} but does not run after it; "
                    f"add {stage_input.upstream} >> {spec.name}"
                )
        specs.append(spec)
    return specs


def _check_names(dag: Any) -> None:
    """A DAG or a stage named like one of the provider's folders would write its default layout into it."""
    try:
        dag_folder_name(dag.dag_id)
    except ValueError as exc:
        raise StageGraphError(str(exc)) from None
    for task in dag.tasks:
        if is_stage(task) and task.task_id in RESERVED_FOLDERS:
            raise StageGraphError(
                f"stage {task.task_id!r} is named like a folder the provider reserves in a run's folder "
                f"({', '.join(RESERVED_FOLDERS)}); rename the task"
            )


def _check_output_paths(dag: Any) -> None:
    """A literal relative output_path in the user's part of the root, and one writer per path.

    Absolute paths are judged against the storage root and templates once rendered, when the stage runs
    (execution/region_folder.py): neither the root nor the rendered value is known at parse time.
    """
    writers: dict[str, str] = {}
    for task in dag.tasks:
        path = getattr(task, "output_path", None) if is_stage(task) else None
        if path is None:
            continue
        relative = relative_output_path(path) if isinstance(path, str) else None
        problem = None if relative is None else output_path_problem(relative, dag.dag_id)
        if problem is not None:
            raise StageGraphError(
                f"stage {task.task_id!r}: output_path {path!r} {problem}; {output_path_allowed(dag.dag_id)}"
            )
        if path in writers:
            raise StageGraphError(
                f"stages {writers[path]!r} and {task.task_id!r} both write output_path {path!r}; "
                "give each stage its own path (or leave output_path unset for a unique one per run)"
            )
        writers[path] = task.task_id


def read_dag(dag: Any, *, all_sources_in_one_region: bool | None = None) -> DagPlan:
    """Validate the DAG's stages and return their parse-time plan.

    ``all_sources_in_one_region`` defaults to what the DAG declares with
    :func:`~airflow_provider_finegrained.dags.declaration.all_sources_in_one_region` (what a run uses);
    True or False overrides it, to see the plan either way.
    """
    declared = all_sources_in_one_region is None
    if all_sources_in_one_region is None:
        all_sources_in_one_region = declares_all_sources_in_one_region(dag)
    plan = plan_stages(stage_specs(dag), dag_id=dag.dag_id, all_sources_in_one_region=all_sources_in_one_region)
    if declared and all_sources_in_one_region:
        _check_sources_follow_leader(dag, plan)
    if declared:
        _check_forward_groups_decided_once(dag, plan)
    return plan


def _check_sources_follow_leader(dag: Any, plan: DagPlan) -> None:
    """The sources' region runs from its leader, so every other source must run after it.

    :func:`all_sources_in_one_region` wires that for stages of the DAG when it is called and for
    stages declared after it; a stage added to the DAG another way would otherwise never run its part.
    """
    sources = [name for name, stage in plan.stages.items() if not stage.inputs]
    if not sources:
        return
    leader = plan.region_of(sources[0])[0]
    for name in sources:
        if name != leader and leader not in dag.get_task(name).get_flat_relative_ids(upstream=True):
            raise StageGraphError(
                f"DAG {dag.dag_id!r} puts all sources in one region, led by {leader!r}, but source stage "
                f"{name!r} does not run after it; declare the stages inside the DAG after "
                "all_sources_in_one_region(dag), or call it again after adding them"
            )


def _check_forward_groups_decided_once(dag: Any, plan: DagPlan) -> None:
    """A forward group split over regions is decided by the region that runs first; the others take its value.

    They read it from the trace of a group member that ran (``decide_region``'s ``ran_with``), so one of the
    group's regions must hold a member that runs before the leader of each other group region. Without that,
    two regions could both run first (no dependency between them) and decide the group twice, with two
    values. A group with a fixed parallelism decides nothing and is not checked.
    """
    position = {region: i for i, region in enumerate(plan.regions)}
    for group in plan.forward_groups:
        if len(group) < 2 or plan.stages[group[0]].fixed_parallelism is not None:
            continue
        by_region: dict[str, list[str]] = {}
        for name in group:
            by_region.setdefault(plan.stages[name].region, []).append(name)
        if len(by_region) < 2:
            continue
        regions = sorted(by_region, key=position.__getitem__)
        # The plan's order is the stage edges' topological order: the region that runs first is usually the
        # first; a plain dependency (a >> b) can order them otherwise, so each is tried in turn.
        unordered: list[tuple[str, str]] = []
        for first in regions:
            after = _downstream_of(dag, by_region[first])
            late = [r for r in regions if r != first and plan.regions[r][0] not in after]
            if not late:
                break
            unordered.append((first, late[0]))
        else:
            first, other = unordered[0]
            members, leader = by_region[first], plan.regions[other][0]
            leaders = [plan.regions[r][0] for r in regions]
            raise StageGraphError(
                f"stages {list(group)!r} form one forward group (one parallelism) over the regions led by "
                f"{leaders!r}, but none of these regions runs before all the others (the region led by {leader!r} "
                f"does not run after any of {members!r}), so two of them could each decide the group's "
                f"parallelism, differently. Make one run first (for example {members[0]} >> {leader}), give a "
                "stage of the group a fixed parallelism, or make the edges between them not forward"
            )


def _downstream_of(dag: Any, names: list[str]) -> set[str]:
    """Task ids that run after any of ``names`` (by the DAG's dependencies, transitively)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        for task_id in dag.get_task(todo.pop()).downstream_task_ids:
            if task_id not in seen:
                seen.add(task_id)
                todo.append(task_id)
    return seen
