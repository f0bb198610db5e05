"""Layout and SVG of a plan: stages as boxes inside their region's box, exchanges as labelled arrows.

Columns are the longest path from a source (so every exchange points right). Each region gets rows of
its own in a band; regions whose columns do not overlap share a band, so region boxes never overlap.
Pure Python, no Airflow imports.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from html import escape
from typing import Any

NODE_H = 46
COL_GAP = 130
ROW_GAP = 22
PAD = 14
"""Padding of a region's box around its stages."""
TITLE_H = 18
"""Room for the region's title above its stages."""
MARGIN = 12
CHAR_W = 7.2
"""Approximate width of a character at the node font size, to size boxes to their labels."""
CAPTION_CHAR_W = 6.0
TITLE_CHAR_W = 6.2


@dataclass(frozen=True)
class NodeBox:
    stage: str
    region: str
    column: int
    row: int
    x: float
    y: float
    w: float
    h: float


@dataclass(frozen=True)
class RegionBox:
    name: str
    slot_sharing_group: str
    x: float
    y: float
    w: float
    h: float


@dataclass(frozen=True)
class Edge:
    producer: str
    consumer: str
    mode: str
    distribution: str

    @property
    def label(self) -> str:
        return f"{self.mode} · {self.distribution}"


@dataclass(frozen=True)
class Layout:
    nodes: dict[str, NodeBox]
    regions: list[RegionBox]
    edges: list[Edge]
    width: float
    height: float


def columns(stages: list[str], edges: list[Edge]) -> dict[str, int]:
    """Longest path from a source for each stage (0 for sources); cycles cannot occur in a DAG."""
    ups: dict[str, list[str]] = {s: [] for s in stages}
    for e in edges:
        if e.consumer in ups and e.producer in ups:
            ups[e.consumer].append(e.producer)
    column: dict[str, int] = {}

    def visit(stage: str, depth: int = 0) -> int:
        if stage not in column:
            if depth > len(stages):
                raise ValueError(f"the plan's exchanges form a cycle through {stage!r}")
            column[stage] = 1 + max((visit(u, depth + 1) for u in ups[stage]), default=-1)
        return column[stage]

    for stage in stages:
        visit(stage)
    return column


def layout(plan: Mapping[str, Any], captions: Mapping[str, str] | None = None) -> Layout:
    """Positions of every stage and region of ``plan`` (a ``plan_to_dict`` value).

    Boxes are wide enough for the stage's name and its caption, and a region's box for its title.
    """
    captions = captions or {}
    stage_info: Mapping[str, Any] = plan.get("stages", {})
    regions: list[tuple[str, str, list[str]]] = []
    placed: set[str] = set()
    for region in plan.get("regions", []):
        members = [s for s in region.get("stages", []) if s in stage_info and s not in placed]
        placed.update(members)
        if members:
            regions.append((str(region["name"]), str(region.get("slot_sharing_group", "")), members))
    for stage in stage_info:
        if stage not in placed:
            info = stage_info[stage]
            regions.append((str(info.get("region") or stage), str(info.get("slot_sharing_group", "")), [stage]))
    stages = [s for _, _, members in regions for s in members]
    edges = [
        Edge(str(e["producer"]), str(e["consumer"]), str(e.get("mode", "")), str(e.get("distribution", "")))
        for e in plan.get("exchanges", [])
        if e.get("producer") in stage_info and e.get("consumer") in stage_info
    ]
    column = columns(stages, edges)
    n_columns = 1 + max(column.values(), default=0)
    col_w = [0.0] * n_columns
    for s in stages:
        col_w[column[s]] = max(col_w[column[s]], node_width(s, captions.get(s, "")))
    for name, group, members in regions:
        if len({column[s] for s in members}) == 1:
            only = column[members[0]]
            col_w[only] = max(col_w[only], TITLE_CHAR_W * len(region_title(name, group)) + 16 - 2 * PAD)

    # Pack regions into bands: a band holds regions whose column spans do not overlap.
    bands: list[list[tuple[str, str, list[str]]]] = []
    band_columns: list[set[int]] = []
    for region in sorted(regions, key=lambda r: min(column[s] for s in r[2])):
        span = set(range(min(column[s] for s in region[2]), max(column[s] for s in region[2]) + 1))
        for i, used in enumerate(band_columns):
            if not used & span:
                bands[i].append(region)
                used.update(span)
                break
        else:
            bands.append([region])
            band_columns.append(span)

    col_x = [MARGIN + PAD + sum(col_w[:i]) + i * (COL_GAP + 2 * PAD) for i in range(n_columns)]
    nodes: dict[str, NodeBox] = {}
    boxes: list[RegionBox] = []
    y = float(MARGIN)
    for band in bands:
        band_rows = 1
        for name, group, members in band:
            rows_used: dict[int, int] = {}
            for s in members:
                row = rows_used.get(column[s], 0)
                rows_used[column[s]] = row + 1
                top = y + TITLE_H + PAD + row * (NODE_H + ROW_GAP)
                nodes[s] = NodeBox(s, name, column[s], row, col_x[column[s]], top, col_w[column[s]], NODE_H)
            band_rows = max(band_rows, *rows_used.values())
            first = min(column[s] for s in members)
            last = max(column[s] for s in members)
            height = TITLE_H + 2 * PAD + max(rows_used.values()) * (NODE_H + ROW_GAP) - ROW_GAP
            box_w = col_x[last] + col_w[last] - col_x[first] + 2 * PAD
            boxes.append(RegionBox(name, group, col_x[first] - PAD, y, box_w, height))
        y += TITLE_H + 2 * PAD + band_rows * (NODE_H + ROW_GAP) - ROW_GAP + ROW_GAP
    width = (col_x[-1] + col_w[-1] + PAD + MARGIN) if stages else 2 * MARGIN
    return Layout(nodes, boxes, edges, width, max(y - ROW_GAP + MARGIN, 2.0 * MARGIN))


def node_width(stage: str, caption: str = "") -> float:
    return max(130.0, CHAR_W * len(stage) + 24, CAPTION_CHAR_W * len(caption) + 16)


def region_title(name: str, slot_sharing_group: str) -> str:
    return f"{name} · slot sharing group {slot_sharing_group}"


_EDGE_COLOUR = {"broadcast": "#b45309", "forward": "#047857"}


def graph_svg(plan: Mapping[str, Any], captions: Mapping[str, str] | None = None) -> str:
    """The plan as an inline SVG; ``captions`` adds a second line to stages (e.g. what a run decided)."""
    captions = captions or {}
    lay = layout(plan, captions)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plan-graph" width="{lay.width:.0f}" '
        f'height="{lay.height:.0f}" viewBox="0 0 {lay.width:.0f} {lay.height:.0f}" role="img" '
        f'aria-label="pipelined regions of {escape(str(plan.get("dag_id", "")))}">',
        "<defs>",
        '<marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M 0 0 L 10 5 L 0 10 z" fill="#475569"/></marker>',
        "</defs>",
    ]
    for box in lay.regions:
        title = region_title(box.name, box.slot_sharing_group)
        out.append(
            f'<g class="region" data-region="{escape(box.name)}">'
            f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" rx="8" '
            'fill="#eef2ff" stroke="#6366f1" stroke-width="1.2"/>'
            f'<text x="{box.x + 8:.1f}" y="{box.y + 14:.1f}" font-size="11" fill="#3730a3">{escape(title)}</text></g>'
        )
    for edge in lay.edges:
        a, b = lay.nodes[edge.producer], lay.nodes[edge.consumer]
        x1, y1, x2, y2 = a.x + a.w, a.y + a.h / 2, b.x, b.y + b.h / 2
        dash = ' stroke-dasharray="6 4"' if edge.mode == "blocking" else ""
        colour = _EDGE_COLOUR.get(edge.distribution, "#475569")
        mx, my = (x1 + x2) / 2, (y1 + y2) / 2
        out.append(
            f'<g class="exchange" data-producer="{escape(edge.producer)}" data-consumer="{escape(edge.consumer)}">'
            f'<path d="M {x1:.1f} {y1:.1f} C {mx:.1f} {y1:.1f}, {mx:.1f} {y2:.1f}, {x2:.1f} {y2:.1f}" fill="none" '
            f'stroke="{colour}" stroke-width="1.6"{dash} marker-end="url(#arrow)"/>'
            f'<text x="{mx:.1f}" y="{my - 5:.1f}" font-size="10" text-anchor="middle" fill="{colour}" '
            f'paint-order="stroke" stroke="#ffffff" stroke-width="3">{escape(edge.label)}</text></g>'
        )
    for node in lay.nodes.values():
        caption = captions.get(node.stage, "")
        text_y = node.y + (18 if caption else 28)
        out.append(
            f'<g class="stage" data-stage="{escape(node.stage)}">'
            f'<rect x="{node.x:.1f}" y="{node.y:.1f}" width="{node.w:.1f}" height="{node.h:.1f}" rx="5" '
            'fill="#ffffff" stroke="#1e293b" stroke-width="1.2"/>'
            f'<text x="{node.x + node.w / 2:.1f}" y="{text_y:.1f}" font-size="12" font-weight="600" '
            f'text-anchor="middle" fill="#0f172a">{escape(node.stage)}</text>'
        )
        if caption:
            out.append(
                f'<text x="{node.x + node.w / 2:.1f}" y="{node.y + 35:.1f}" font-size="10" text-anchor="middle" '
                f'fill="#475569">{escape(caption)}</text>'
            )
        out.append("</g>")
    out.append("</svg>")
    return "".join(out)
