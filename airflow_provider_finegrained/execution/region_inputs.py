"""A region's stage inputs, gathered before it is decided: what each stage reads from outside its region.

Upstream stages outside the region are read from their XCom (the committed output, checked readable) and
their trace (the parallelism a forward producer ran with); external datasets are measured where they lie.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from airflow_provider_finegrained.contract import OUTPUT_KEY, TRACE_KEY, OutputRecord, UpstreamOutputError
from airflow_provider_finegrained.execution.decision import StageInputs, forward_group_peers
from airflow_provider_finegrained.execution.measure import measure_external
from airflow_provider_finegrained.planning import DagPlan, Distribution
from airflow_provider_finegrained.runtime.output import OutputError
from airflow_provider_finegrained.storage.locations import same_store

__all__ = ["CommittedReader", "XComReader", "gather_inputs", "options_for", "peers_ran_with", "stage_inputs"]


class XComReader(Protocol):
    """The task instance's XCom read (Airflow's ``ti.xcom_pull``)."""

    def xcom_pull(self, task_ids: str, key: str) -> Any: ...


class CommittedReader(Protocol):
    """Reads an upstream stage's committed output (``RegionFolder.read_committed``); OutputError if unreadable."""

    def read_committed(self, location: str) -> Any: ...


def options_for(location: str, storage_root: str, storage_options: dict[str, Any]) -> dict[str, Any] | None:
    """The storage root's credentials for a location in the same store; fsspec's defaults elsewhere."""
    return storage_options if same_store(location, storage_root) else None


def stage_inputs(
    stage: str,
    plan: DagPlan,
    members: Sequence[str],
    external_inputs: Mapping[str, Any],
    ti: XComReader,
    folder: CommittedReader,
    storage_root: str,
    storage_options: dict[str, Any],
) -> StageInputs:
    """One stage's inputs: upstream outputs outside the region (readable), forward parallelism, external sizes."""
    upstream: dict[str, OutputRecord] = {}
    upstream_parallelism: dict[str, int] = {}
    for exchange in plan.stages[stage].inputs:
        if exchange.producer in members:
            continue
        value = ti.xcom_pull(task_ids=exchange.producer, key=OUTPUT_KEY)
        record = OutputRecord.from_xcom(value, upstream=exchange.producer, consumer=stage)
        try:
            folder.read_committed(record.path)
        except OutputError as exc:
            raise UpstreamOutputError(
                f"stage {stage!r} reads from {exchange.producer!r}, whose output is not readable: {exc}; "
                f"clear and rerun {exchange.producer!r}"
            ) from exc
        upstream[exchange.input_name] = record
        if exchange.distribution is Distribution.FORWARD:
            trace = ti.xcom_pull(task_ids=exchange.producer, key=TRACE_KEY) or {}
            if "parallelism" in trace:
                upstream_parallelism[exchange.input_name] = int(trace["parallelism"])
    external = {}
    broadcast = set()
    for name, dataset in external_inputs.items():
        try:
            options = options_for(dataset.path, storage_root, storage_options)
            external[name] = measure_external(dataset.path, dataset.format, storage_options=options)
        except FileNotFoundError as exc:
            raise FileNotFoundError(f"stage {stage!r}, input {name!r}: {exc}") from exc
        if dataset.broadcast:
            broadcast.add(name)
    return StageInputs(upstream, external, frozenset(broadcast), upstream_parallelism)


def gather_inputs(
    plan: DagPlan,
    members: Sequence[str],
    external_inputs: Mapping[str, Mapping[str, Any]],
    ti: XComReader,
    folder: CommittedReader,
    storage_root: str,
    storage_options: dict[str, Any],
) -> dict[str, StageInputs]:
    """Every member's inputs, in the region's order (``external_inputs``: per member, its external datasets)."""
    return {
        m: stage_inputs(m, plan, members, external_inputs[m], ti, folder, storage_root, storage_options)
        for m in members
    }


def peers_ran_with(plan: DagPlan, region: str, ti: XComReader) -> dict[str, int]:
    """The parallelism each member of this region's forward groups outside it ran with (its trace).

    A group whose members sit in several regions is decided by the first of them to run; the later
    ones take its value from these (the DAG reader makes sure one region runs before the others).
    """
    ran: dict[str, int] = {}
    for peer in forward_group_peers(plan, region):
        trace = ti.xcom_pull(task_ids=peer, key=TRACE_KEY) or {}
        if trace.get("parallelism") is not None:
            ran[peer] = int(trace["parallelism"])
    return ran
