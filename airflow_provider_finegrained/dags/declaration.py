"""Declaring a stage on an Airflow task: inputs by upstream task, resources, parallelism bounds.

``StageDeclarationMixin`` is shared by every stage operator: it turns user arguments into a
:class:`~airflow_provider_finegrained.planning.StageSpec` on ``self.stage_spec`` (the reader's seam)
and wires each upstream stage before this one, so the Airflow dependencies match the data flow.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_finegrained.planning import Distribution, ExchangeMode, ResourceSpec, StageGraphError, StageSpec


@dataclass(frozen=True)
class Input:
    """An input of a stage: an upstream stage (operator, XComArg or task id) and how it is exchanged."""

    upstream: Any
    mode: ExchangeMode | str = ExchangeMode.BLOCKING
    distribution: Distribution | str = Distribution.ALL_TO_ALL


@dataclass
class ExternalDataset:
    """An input read from files outside the provider: a path (local or fsspec URL) and a format.

    ``path`` and ``options`` are templated. The stage measures the files' real sizes before it runs,
    so a source stage is sized from the data it reads. ``broadcast=True`` sends it whole to every task.
    """

    path: str
    format: str = "parquet"
    options: dict[str, str] = field(default_factory=dict)
    broadcast: bool = False

    template_fields = ("path", "options")


def _dag_of(task: Any) -> Any | None:
    """The task's DAG, or None while it has none (Airflow 3's ``task.dag`` raises then)."""
    try:
        return getattr(task, "dag", None)
    except RuntimeError:
        return None


def _upstream_task(value: Any) -> Any | None:
    """The operator behind an operator or an XComArg (``.operator``), else None."""
    operator = getattr(value, "operator", None)
    if operator is not None and hasattr(operator, "task_id"):
        return operator
    return value if hasattr(value, "task_id") and hasattr(value, "set_downstream") else None


DECLARATION_ARGS = (
    "inputs",
    "resources",
    "parallelism",
    "min_parallelism",
    "max_parallelism",
    "slot_sharing_group",
    "memory_weight",
)
"""The keyword arguments every stage operator accepts for its declaration (see ``declare_stage``)."""


def pop_declaration(kwargs: dict[str, Any]) -> dict[str, Any]:
    """Take the declaration arguments out of an operator's keyword arguments."""
    return {name: kwargs.pop(name) for name in DECLARATION_ARGS if name in kwargs}


class StageDeclarationMixin:
    """Builds ``stage_spec`` for a BaseOperator subclass; call :meth:`declare_stage` in ``__init__``."""

    task_id: str
    stage_spec: StageSpec
    external_inputs: dict[str, ExternalDataset]

    def declare_stage(
        self,
        *,
        inputs: Mapping[str, Any] | None = None,
        resources: ResourceSpec | Mapping[str, Any] | None = None,
        parallelism: int | None = None,
        min_parallelism: int | None = None,
        max_parallelism: int | None = None,
        slot_sharing_group: str | None = None,
        memory_weight: float = 1.0,
    ) -> StageSpec:
        declared: dict[str, Mapping[str, str] | str] = {}
        self.external_inputs = {}
        pipelined_from: list[Any] = []
        blocking_from: list[Any] = []
        for name, value in (inputs or {}).items():
            if isinstance(value, ExternalDataset):
                self.external_inputs[name] = value
                continue
            stage_input = value if isinstance(value, Input) else Input(value)
            task = _upstream_task(stage_input.upstream)
            dag = _dag_of(self)
            if task is None and isinstance(stage_input.upstream, str) and dag is not None:
                # A task id of a stage defined earlier is wired like the operator itself.
                task = dag.task_dict.get(stage_input.upstream)
            if task is not None:
                upstream_id = task.task_id
                task.set_downstream(self)
                pipelined = str(stage_input.mode).lower() == ExchangeMode.PIPELINED.value
                (pipelined_from if pipelined else blocking_from).append(task)
            elif isinstance(stage_input.upstream, str):
                upstream_id = stage_input.upstream
            else:
                raise TypeError(
                    f"stage {self.task_id!r}: input {name!r} must name an upstream stage (operator, XComArg "
                    f"or task id) or be an ExternalDataset, got {type(stage_input.upstream).__name__}"
                )
            declared[name] = {
                "upstream": upstream_id,
                "mode": str(stage_input.mode),
                "distribution": str(stage_input.distribution),
            }
        self.stage_spec = StageSpec.build(
            self.task_id,
            declared,
            resources=resources,
            parallelism=parallelism,
            min_parallelism=min_parallelism,
            max_parallelism=max_parallelism,
            slot_sharing_group=slot_sharing_group,
            memory_weight=memory_weight,
        )
        dag = _dag_of(self)
        if not declared and declares_all_sources_in_one_region(dag):
            # FLIP-53's virtual source: every source stage joins the region of the DAG's first one.
            first = next((t for t in _source_stages(dag) if t is not self), None)
            if first is not None:
                pipelined_from.append(first)
        _wire_region(self, pipelined_from, blocking_from)
        return self.stage_spec


ALL_SOURCES_ATTRIBUTE = "finegrained_all_sources_in_one_region"
"""The DAG attribute :func:`all_sources_in_one_region` sets and the reader reads."""


def all_sources_in_one_region(dag: Any) -> None:
    """Run every source stage of ``dag`` (one without stage inputs) in one pipelined region (FLIP-53).

    Call it in the DAG file, inside or after the ``with DAG(...) as dag:`` block, before or after the
    stages are declared. The run and ``python -m airflow_provider_finegrained plan`` both read it,
    and the region's first source stage becomes the leader the other sources run after.
    """
    if not hasattr(dag, "task_dict") or not hasattr(dag, "dag_id"):
        raise TypeError(f"all_sources_in_one_region needs an Airflow DAG, got {type(dag).__name__}")
    setattr(dag, ALL_SOURCES_ATTRIBUTE, True)
    sources = _source_stages(dag)
    for source in sources[1:]:
        root, leader = _region_root(source), _region_root(sources[0])
        if root is leader:
            continue
        if root.task_id in leader.get_flat_relative_ids(upstream=True):
            # The leader already waits for this source's region (a blocking input of a member); it
            # cannot also run before it. Declared first, the source would have joined the region.
            raise StageGraphError(
                f"DAG {dag.dag_id!r}: all_sources_in_one_region: stage {leader.task_id!r} (the region's first "
                f"source) already runs after stage {root.task_id!r}; call all_sources_in_one_region(dag) "
                "before declaring the stages"
            )
        _merge_regions(root, [sources[0]])


def declares_all_sources_in_one_region(dag: Any) -> bool:
    """Whether the DAG declared :func:`all_sources_in_one_region`."""
    return getattr(dag, ALL_SOURCES_ATTRIBUTE, False) is True


def _source_stages(dag: Any) -> list[Any]:
    """The DAG's stage tasks without stage inputs, in the order they were created."""
    return [
        task
        for task in dag.tasks
        if isinstance(getattr(task, "stage_spec", None), StageSpec)
        and not task.stage_spec.inputs
        and hasattr(task, "_finegrained_region_parent")
    ]


def _region_root(task: Any) -> Any:
    root = task
    while getattr(root, "_finegrained_region_parent", root) is not root:
        root = root._finegrained_region_parent
    return root


def _wire_region(task: Any, pipelined_from: list[Any], blocking_from: list[Any]) -> None:
    """Keep each pipelined region's first stage (its leader) upstream of everything the region needs.

    The leader runs the whole region as one Spark application, so it must start after every
    blocking input of every member, and every member must run after it (to report its part).
    Regions are merged as pipelined inputs join them; the earliest created stage leads.
    """
    task._finegrained_region_parent = task
    task._finegrained_region_blocking = list(blocking_from)
    _merge_regions(task, pipelined_from)


def _merge_regions(task: Any, pipelined_from: list[Any]) -> None:
    """Merge ``task``'s region with the regions of the stages it reads from pipelined."""
    roots = {id(r): r for r in (_region_root(u) for u in pipelined_from if hasattr(u, "stage_spec"))}
    if not roots:
        return
    leaders = sorted([*roots.values(), task], key=lambda t: t.dag.task_ids.index(t.task_id) if t.dag else 0)
    leader = leaders[0]
    blocking: list[Any] = []
    for other in leaders[1:]:
        blocking.extend(other._finegrained_region_blocking)
        other._finegrained_region_parent = leader
        if other is not task and leader.task_id not in other.upstream_task_ids:
            leader.set_downstream(other)
    if task is not leader and leader.task_id not in task.get_flat_relative_ids(upstream=True):
        leader.set_downstream(task)
    leader._finegrained_region_blocking.extend(blocking)
    for producer in blocking:
        # A producer downstream of the leader belongs to the region (a blocking cycle the planner merges).
        downstream_of_leader = producer.task_id in leader.get_flat_relative_ids(upstream=False)
        if _region_root(producer) is not leader and not downstream_of_leader:
            producer.set_downstream(leader)
