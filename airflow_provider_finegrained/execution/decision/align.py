"""Aligning forward-group followers with their leader after sizing, as a new value. Pure.

Sizing may move the deciding stage of a forward group to even waves or raise it to its memory floor
(within the group's bounds); the rest of its forward group runs with the same count. A follower's file
scans follow the group's uncorrected count, as the decider's do (the same count when no learned factor
corrected the decider's shuffle side).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from airflow_provider_finegrained.execution.decision.decider import StageChoice
from airflow_provider_finegrained.planning import RegionSizing
from airflow_provider_finegrained.planning.balance import decide_balance
from airflow_provider_finegrained.planning.stage_sizing import StageSizing, split_bytes


def align_followers(sizing: RegionSizing, choices: Sequence[StageChoice]) -> RegionSizing:
    """``sizing`` with every in-region follower of a forward group at its leader's sized count (a new value)."""
    stages = {
        choice.stage: (
            sizing.stages[choice.stage]
            if choice.follows is None
            else follow(sizing, choice, sizing.stages[choice.follows], choice.follows)
        )
        for choice in choices
    }
    return replace(sizing, stages=stages)


def follow(sizing: RegionSizing, choice: StageChoice, leader: StageSizing, leader_name: str) -> StageSizing:
    """The follower ``choice``'s sizing at ``leader``'s count, waves and scan tasks."""
    own = sizing.stages[choice.stage]
    balance = own.balance
    if leader.scan_tasks != own.scan_tasks:
        balance = decide_balance(
            choice.consumption.file_bytes,
            leader.scan_tasks,
            row_group_bytes=choice.consumption.row_group_bytes,
            cores=sizing.slots * sizing.task_cpus,
            slots=sizing.slots,
        )
    moved = leader.parallelism != own.parallelism
    return replace(
        own,
        parallelism=leader.parallelism,
        waves=leader.waves,
        tasks_per_executor=leader.tasks_per_executor,
        max_partition_bytes=(
            balance.max_partition_bytes
            if balance
            else split_bytes(choice.consumption.estimated_output, leader.scan_tasks)
        ),
        scan_parallelism=leader.scan_tasks,
        balance=balance,
        notes=(*own.notes, follow_note(leader_name, leader)) if moved else own.notes,
    )


def follow_note(decider: str, ran_with: StageSizing) -> str:
    why = "; ".join(ran_with.notes)
    return f"forward group: {ran_with.parallelism} like {decider!r}" + (f" ({why})" if why else "")
