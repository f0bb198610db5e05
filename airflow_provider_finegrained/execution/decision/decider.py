"""The per-stage decider: one stage's parallelism, the rule that gave it, and what sizing needs of it. Pure.

In the spirit of Flink's ``VertexParallelismAndInputInfosDecider``: a function of the stage, the bytes it
consumes and its settings (plus its forward group, resolved beforehand, and an expansion learned from its
past runs). The input balance over the stage's tasks follows in sizing, once the slots are known.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from airflow_provider_finegrained.execution.decision.groups import GroupPlan
from airflow_provider_finegrained.execution.decision.inputs import Consumption
from airflow_provider_finegrained.planning import (
    DagPlan,
    Distribution,
    GroupBounds,
    LearnedExpansion,
    ParallelismConfig,
    StageDemand,
    StagePlan,
    explain_parallelism,
)

BYTES_RULE = "bytes / avg_bytes_per_task"
FIXED_RULE = "fixed parallelism (stage or its forward group)"


@dataclass(frozen=True)
class StageChoice:
    """One stage's decided parallelism (before sizing) and why."""

    stage: str
    parallelism: int
    rule: str
    computed: int | None
    """What the formula gave before bounds and normalization (``ParallelismDecision.computed``)."""
    config: ParallelismConfig
    """The stage's own settings."""
    consumption: Consumption
    low: int
    high: int
    """The bounds it was decided within: its forward group's, or its own."""
    leads: bool
    """It decided its forward group (or is a group of one): sizing may move it."""
    follows: str | None = None
    """The in-region stage that decided its forward group (whose sizing it takes)."""
    scan_parallelism: int | None = None
    """The count from its bytes on disk alone, when a learned work factor corrected the shuffle side."""
    expansion: LearnedExpansion | None = None
    corrected: bool = False
    """The learned work factor corrected the decision."""
    power_of_two: bool = False

    def demand(self, plan_stage: StagePlan) -> StageDemand:
        """What sizing reads of this choice."""
        return StageDemand(
            self.stage,
            self.parallelism,
            consumed_bytes=self.consumption.estimated_output,
            min_parallelism=self.low,
            max_parallelism=self.high,
            memory_fraction=plan_stage.memory_fraction,
            resources=plan_stage.resources,
            fixed=not self.leads,
            memory_expansion=self.expansion.memory if self.expansion else None,
            input_file_bytes=self.consumption.file_bytes,
            input_row_group_bytes=self.consumption.row_group_bytes,
            scan_parallelism=self.scan_parallelism if self.leads else None,
            power_of_two=self.power_of_two,
        )


def decide_stage(
    plan: DagPlan,
    name: str,
    consumption: Consumption,
    config: ParallelismConfig,
    group: GroupPlan,
    expansion: LearnedExpansion | None = None,
    leader: StageChoice | None = None,
) -> StageChoice:
    """Decide stage ``name``: fixed, inherited from its forward group, or from the bytes it consumes.

    ``group``: its forward group, resolved before any stage of the region was decided; ``leader``: the
    choice of the in-region stage that decided the group, for its other members. Only the stage that
    decides for its group decides within the group's bounds; the explanation of the others (from their own
    bytes and bounds) stays in their rule only as far as the trace's ``computed_parallelism``.
    """
    stage = plan.stages[name]
    decides = stage.fixed_parallelism is None and group.leader == name
    deciding = _within(config, group.bounds, group.members) if decides else config
    corrected = decides and expansion is not None and bool(consumption.results)
    explained = explain_parallelism(
        consumption.as_work(expansion) if corrected and expansion else consumption.results, deciding
    )
    rule = explained.rule
    scan: int | None = None
    if corrected and expansion:
        rule = expansion.rule if rule == BYTES_RULE else f"{rule} ({expansion.rule})"
        scan = explain_parallelism(consumption.results, deciding).parallelism
    if explained.notes:  # the normalization that gave the number is part of its rule
        rule = f"{rule}; {'; '.join(explained.notes)}"
    bounds = group.bounds
    low, high = (config.min_parallelism, config.max_parallelism) if bounds is None else (bounds.low, bounds.high)
    base = StageChoice(
        name, explained.parallelism, rule, explained.computed, config, consumption, low, high, False,
        expansion=expansion, corrected=corrected,
    )  # fmt: skip
    if stage.fixed_parallelism is not None:
        return replace(base, parallelism=stage.fixed_parallelism, rule=FIXED_RULE)
    if group.inherited is not None:
        inherited = group.inherited
        rule = inherited_rule(plan, name, inherited.source)
        if inherited.clamped_from is not None and group.first == name and bounds is not None:
            rule += f"; {inherited.clamped_from} clamped to the forward group's bounds [{bounds.low}, {bounds.high}]"
        return replace(base, parallelism=inherited.parallelism, rule=rule)
    if leader is not None and leader.stage != name:
        return replace(
            base, parallelism=leader.parallelism, rule=inherited_rule(plan, name, leader.stage), follows=leader.stage
        )
    return _leading(base, bounds, scan, deciding)


def _leading(
    base: StageChoice, bounds: GroupBounds | None, scan: int | None, deciding: ParallelismConfig
) -> StageChoice:
    """The choice of the stage that decides its forward group: clamped to the group's bounds."""
    parallelism, rule = base.parallelism, base.rule
    if bounds is not None:
        clamped = bounds.clamp(parallelism)
        if clamped != parallelism:  # a source's default is taken as given unless its group bounds it
            rule = f"{rule}; clamped to the forward group's bounds [{bounds.low}, {bounds.high}]"
            parallelism = clamped
        rule += _bound_setters(bounds, base.config)
        if scan is not None:
            scan = bounds.clamp(scan)
    return replace(
        base,
        parallelism=parallelism,
        rule=rule,
        leads=True,
        scan_parallelism=scan,
        # A source's default is taken as given, not normalized; a decision from bytes is a power of two.
        power_of_two=bool(base.consumption.results) and deciding.normalize == "power_of_two",
    )


def inherited_rule(plan: DagPlan, name: str, source: str) -> str:
    """The rule of a stage that takes its forward group's value from ``source``."""
    direct = any(e.producer == source and e.distribution is Distribution.FORWARD for e in plan.stages[name].inputs)
    return f"forward edge: same as {source!r}" if direct else f"forward group: same as {source!r}"


def _within(config: ParallelismConfig, bounds: GroupBounds | None, group: tuple[str, ...]) -> ParallelismConfig:
    """``config`` with its bounds narrowed to its forward group's."""
    if bounds is None or (config.min_parallelism, config.max_parallelism) == (bounds.low, bounds.high):
        return config
    try:
        return replace(config, min_parallelism=bounds.low, max_parallelism=bounds.high)
    except ValueError as exc:
        raise ValueError(f"forward group {list(group)} (bounds [{bounds.low}, {bounds.high}]): {exc}") from None


def _bound_setters(bounds: GroupBounds, config: ParallelismConfig) -> str:
    """Say which members' bounds narrowed a deciding stage's own, for the trace's rule."""
    parts = []
    if bounds.low != config.min_parallelism:
        parts.append(f"min {bounds.low} from {bounds.low_stage!r}")
    if bounds.high != config.max_parallelism:
        parts.append(f"max {bounds.high} from {bounds.high_stage!r}")
    return f" (forward group bounds: {', '.join(parts)})" if parts else ""
