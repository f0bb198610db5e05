"""What a stage of a region consumes, as known before the region runs. Pure.

Stages of one region run in one application, so a pipelined consumer's input size is estimated from
what its producer consumed (its output is not materialized to measure).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from airflow_provider_finegrained.contract import OutputRecord
from airflow_provider_finegrained.planning import ConsumedResult, DagPlan, Distribution, LearnedExpansion


@dataclass(frozen=True)
class ExternalSizes:
    """An external input (files outside the storage root) and the measured size of each file."""

    path: str
    format: str
    file_bytes: list[int]
    row_group_bytes: int | None = None
    """The largest row group's bytes on disk (parquet footers); None: not read."""


@dataclass(frozen=True)
class StageInputs:
    """What one stage of the region reads, as known before the region runs."""

    upstream: Mapping[str, OutputRecord] = field(default_factory=dict)
    """Committed outputs of blocking upstreams outside the region, by input name."""
    external: Mapping[str, ExternalSizes] = field(default_factory=dict)
    external_broadcast: frozenset[str] = frozenset()
    upstream_parallelism: Mapping[str, int] = field(default_factory=dict)
    """Parallelism upstream stages ran with (from their traces), for forward edges across regions."""

    def to_record(self) -> dict[str, Any]:
        """What the decision read of these inputs, JSON-ready (the trace's ``decided_from["inputs"]``)."""
        return {
            "upstream": {
                name: {"stage": r.stage, "path": r.path, "format": r.format, "partition_bytes": list(r.partition_bytes)}
                for name, r in self.upstream.items()
            },
            "external": {
                name: {
                    "path": e.path,
                    "format": e.format,
                    "file_bytes": list(e.file_bytes),
                    "row_group_bytes": e.row_group_bytes,
                }
                for name, e in self.external.items()
            },
            "external_broadcast": sorted(self.external_broadcast),
            "upstream_parallelism": dict(self.upstream_parallelism),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> StageInputs:
        """The inputs :meth:`to_record` recorded (an upstream's rows and try are not part of a decision)."""
        upstream = {
            name: OutputRecord(
                str(r["stage"]), str(r["path"]), str(r["format"]), [int(b) for b in r["partition_bytes"]], 0, 0
            )
            for name, r in record.get("upstream", {}).items()
        }
        external = {
            name: ExternalSizes(
                str(e["path"]), str(e["format"]), [int(b) for b in e["file_bytes"]], e.get("row_group_bytes")
            )
            for name, e in record.get("external", {}).items()
        }
        return cls(
            upstream,
            external,
            frozenset(record.get("external_broadcast", ())),
            {k: int(v) for k, v in record.get("upstream_parallelism", {}).items()},
        )


@dataclass(frozen=True)
class Consumption:
    """What one stage consumes, as the decider and sizing read it."""

    results: tuple[ConsumedResult, ...]
    """Each input's partition sizes, for the parallelism decision."""
    consumed_bytes: Mapping[str, int]
    """Bytes per input name (the trace's ``consumed_bytes``)."""
    broadcast: frozenset[str]
    file_bytes: tuple[int, ...]
    """The sizes of the files it scans: non-broadcast inputs from outside the region, in the order recorded."""
    row_group_bytes: int | None
    """The largest row group of the files it scans, when all are external inputs whose footers were read."""

    @property
    def estimated_output(self) -> int:
        """Its output's size as an in-region consumer estimates it: the non-broadcast bytes it consumed."""
        return sum(v for k, v in self.consumed_bytes.items() if k not in self.broadcast)

    def as_work(self, expansion: LearnedExpansion) -> list[ConsumedResult]:
        """Non-broadcast inputs scaled to work bytes; broadcast bytes stay (they bound each task's volume)."""
        return [
            r if r.broadcast else ConsumedResult([expansion.scale(b) for b in r.partition_bytes]) for r in self.results
        ]


def consumption(
    plan: DagPlan, name: str, stage_inputs: StageInputs, in_region: Collection[str], estimated: Mapping[str, int]
) -> Consumption:
    """What stage ``name`` consumes: committed upstream outputs, external files, and the estimated outputs
    (``estimated``, by producer) of the in-region producers decided before it."""
    results: list[ConsumedResult] = []
    consumed_bytes: dict[str, int] = {}
    broadcast: set[str] = set()
    file_bytes: list[int] = []
    for exchange in plan.stages[name].inputs:
        is_broadcast = exchange.distribution is Distribution.BROADCAST
        if exchange.producer in in_region:
            sizes = [estimated.get(exchange.producer, 0)]
        else:
            record = stage_inputs.upstream.get(exchange.input_name)
            if record is None:
                raise ValueError(f"stage {name!r}: no committed output for input {exchange.input_name!r}")
            sizes = record.partition_bytes
            if not is_broadcast:
                file_bytes.extend(sizes)
        results.append(ConsumedResult(sizes, broadcast=is_broadcast))
        consumed_bytes[exchange.input_name] = sum(sizes)
        if is_broadcast:
            broadcast.add(exchange.input_name)
    for input_name, external in stage_inputs.external.items():
        is_broadcast = input_name in stage_inputs.external_broadcast
        results.append(ConsumedResult(external.file_bytes, broadcast=is_broadcast))
        consumed_bytes[input_name] = sum(external.file_bytes)
        if is_broadcast:
            broadcast.add(input_name)
        else:
            file_bytes.extend(external.file_bytes)
    row_groups = _scanned_row_group_bytes(plan, name, stage_inputs, in_region)
    return Consumption(tuple(results), consumed_bytes, frozenset(broadcast), tuple(file_bytes), row_groups)


def _scanned_row_group_bytes(
    plan: DagPlan, name: str, stage_inputs: StageInputs, in_region: Collection[str]
) -> int | None:
    """The largest row group among the files a stage scans when every one of them is an external input
    whose footers were read; None (the provider's producers' size assumed) otherwise."""
    for exchange in plan.stages[name].inputs:
        if exchange.producer not in in_region and exchange.distribution is not Distribution.BROADCAST:
            return None  # a committed upstream output: its producer chose the row groups
    measured = [
        external.row_group_bytes
        for input_name, external in stage_inputs.external.items()
        if input_name not in stage_inputs.external_broadcast
    ]
    if not measured or any(m is None for m in measured):
        return None
    return max(m for m in measured if m is not None)
