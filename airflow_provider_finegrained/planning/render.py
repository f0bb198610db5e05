"""Render a :class:`DagPlan` for people (a table), for programs (JSON, and back) and for Graphviz (DOT)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from airflow_provider_finegrained.planning.enums import Distribution, ExchangeMode
from airflow_provider_finegrained.planning.plan import DagPlan, Exchange, StagePlan
from airflow_provider_finegrained.planning.resources import ResourceSpec
from airflow_provider_finegrained.planning.units import format_bytes


def plan_to_dict(plan: DagPlan) -> dict[str, Any]:
    """A JSON-ready description of the plan (also what the UI and XCom use)."""
    return {
        "dag_id": plan.dag_id,
        "regions": [
            {"name": name, "slot_sharing_group": plan.stages[members[0]].slot_sharing_group, "stages": list(members)}
            for name, members in plan.regions.items()
        ],
        "forward_groups": [list(group) for group in plan.forward_groups],
        "stages": {
            name: {
                "region": stage.region,
                "forward_group": stage.forward_group,
                "slot_sharing_group": stage.slot_sharing_group,
                "memory_fraction": stage.memory_fraction,
                "resources": _resources_dict(stage.resources),
                "fixed_parallelism": stage.fixed_parallelism,
                "min_parallelism": stage.min_parallelism,
                "max_parallelism": stage.max_parallelism,
            }
            for name, stage in plan.stages.items()
        },
        "exchanges": [
            {
                "producer": e.producer,
                "consumer": e.consumer,
                "mode": e.mode.value,
                "distribution": e.distribution.value,
                "input": e.input_name,
            }
            for e in plan.exchanges
        ],
    }


def plan_to_json(plan: DagPlan) -> str:
    return json.dumps(plan_to_dict(plan), indent=2)


def plan_to_table(plan: DagPlan) -> str:
    """One row per stage, grouped by region in topological order."""
    header = ("stage", "region", "slot sharing group", "forward group", "fraction", "parallelism", "resources")
    rows: list[tuple[str, ...]] = []
    for members in plan.regions.values():
        for name in members:
            stage = plan.stages[name]
            group = plan.forward_groups[stage.forward_group]
            rows.append(
                (
                    name,
                    stage.region,
                    stage.slot_sharing_group,
                    f"#{stage.forward_group + 1}" + (f" ({len(group)} stages)" if len(group) > 1 else ""),
                    f"{stage.memory_fraction:.3f}",
                    _parallelism_text(stage.fixed_parallelism, stage.min_parallelism, stage.max_parallelism),
                    _resources_text(stage.resources),
                )
            )
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = [
        f"DAG {plan.dag_id}: {len(plan.stages)} stages, {len(plan.regions)} pipelined regions, "
        f"{len(plan.forward_groups)} forward groups"
    ]
    lines.append("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)).rstrip())
    lines.append("  ".join("-" * w for w in widths))
    lines.extend("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)
    lines.append("exchanges:")
    lines.extend(
        f"  {e.producer} -> {e.consumer} ({e.input_name}): {e.mode.value}, {e.distribution.value}"
        for e in plan.exchanges
    )
    return "\n".join(lines)


_EDGE_STYLE = {ExchangeMode.PIPELINED: "solid", ExchangeMode.BLOCKING: "dashed"}
_ARROW = {Distribution.ALL_TO_ALL: "normal", Distribution.FORWARD: "empty", Distribution.BROADCAST: "diamond"}


def plan_to_dot(plan: DagPlan) -> str:
    """Graphviz DOT: a cluster per region; pipelined edges solid, blocking dashed."""
    lines = [f"digraph {_quote(plan.dag_id or 'dag')} {{", "  rankdir=LR;", "  node [shape=box];"]
    for i, (region, members) in enumerate(plan.regions.items()):
        group = plan.stages[members[0]].slot_sharing_group
        lines.append(f"  subgraph cluster_{i} {{")
        lines.append(f"    label={_quote(f'{region} (slot sharing group {group})')};")
        for name in members:
            fraction = plan.stages[name].memory_fraction
            lines.append(f"    {_quote(name)} [label={_quote(f'{name} fraction={fraction:.2f}')}];")
        lines.append("  }")
    for e in plan.exchanges:
        label = f"{e.mode.value}/{e.distribution.value}"
        lines.append(
            f"  {_quote(e.producer)} -> {_quote(e.consumer)} "
            f"[style={_EDGE_STYLE[e.mode]}, arrowhead={_ARROW[e.distribution]}, label={_quote(label)}];"
        )
    lines.append("}")
    return "\n".join(lines)


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _resources_dict(spec: ResourceSpec | None) -> dict[str, float] | None:
    if spec is None:
        return None
    return {
        "cpu_cores": spec.cpu_cores,
        "heap_memory": spec.heap_memory,
        "off_heap_memory": spec.off_heap_memory,
        "managed_memory": spec.managed_memory,
        "gpus": spec.gpus,
    }


def _resources_text(spec: ResourceSpec | None) -> str:
    if spec is None:
        return "unknown"
    text = f"{spec.cpu_cores:g} cpu, heap {format_bytes(spec.heap_memory)}"
    if spec.managed_memory:
        text += f", managed {format_bytes(spec.managed_memory)}"
    if spec.off_heap_memory:
        text += f", off-heap {format_bytes(spec.off_heap_memory)}"
    if spec.gpus:
        text += f", {spec.gpus:g} gpu"
    return text


def _parallelism_text(fixed: int | None, low: int | None, high: int | None) -> str:
    if fixed is not None:
        return f"fixed {fixed}"
    if low is None and high is None:
        return "adaptive"
    return f"adaptive [{low or 1}, {high if high is not None else 'max'}]"


def plan_from_dict(data: Mapping[str, Any]) -> DagPlan:
    """The plan :func:`plan_to_dict` described (as stored in XCom): equal to the plan it was made from."""
    exchanges = tuple(
        Exchange(
            producer=str(e["producer"]),
            consumer=str(e["consumer"]),
            mode=ExchangeMode(e["mode"]),
            distribution=Distribution(e["distribution"]),
            input_name=str(e["input"]),
        )
        for e in data["exchanges"]
    )
    inputs: dict[str, list[Exchange]] = {}
    for exchange in exchanges:
        inputs.setdefault(exchange.consumer, []).append(exchange)
    stages = {
        name: StagePlan(
            name=name,
            region=str(stage["region"]),
            forward_group=int(stage["forward_group"]),
            slot_sharing_group=str(stage["slot_sharing_group"]),
            memory_fraction=float(stage["memory_fraction"]),
            resources=ResourceSpec.from_value(stage["resources"]),
            fixed_parallelism=stage["fixed_parallelism"],
            min_parallelism=stage["min_parallelism"],
            max_parallelism=stage["max_parallelism"],
            inputs=tuple(inputs.get(name, ())),
        )
        for name, stage in data["stages"].items()
    }
    return DagPlan(
        dag_id=str(data.get("dag_id", "")),
        stages=stages,
        regions={str(r["name"]): tuple(r["stages"]) for r in data["regions"]},
        forward_groups=tuple(tuple(group) for group in data["forward_groups"]),
        exchanges=exchanges,
    )
