"""Plan layout and its SVG: columns, region bands, box sizes, edge labels (hand-worked numbers)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from airflow_provider_finegrained.ui import graph
from airflow_provider_finegrained.ui.graph import Edge, columns, graph_svg, layout
from tests.ui.plans import BROADCAST_FORWARD, SINGLE, plan

SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize(
    ("stages", "edges", "expected"),
    [
        (["a"], [], {"a": 0}),
        (["a", "b"], [("a", "b")], {"a": 0, "b": 1}),
        # The longest path wins: c reads a directly and through b.
        (["a", "b", "c"], [("a", "b"), ("b", "c"), ("a", "c")], {"a": 0, "b": 1, "c": 2}),
        (
            ["dim", "src", "join", "agg"],
            [("dim", "join"), ("src", "join"), ("join", "agg")],
            {"dim": 0, "src": 0, "join": 1, "agg": 2},
        ),
        # An exchange to a stage the plan does not list is ignored.
        (["a"], [("ghost", "a")], {"a": 0}),
    ],
)
def test_columns_are_longest_paths(stages: list[str], edges: list[tuple[str, str]], expected: dict[str, int]) -> None:
    assert columns(stages, [Edge(p, c, "blocking", "all_to_all") for p, c in edges]) == expected


def test_single_stage_box_positions() -> None:
    lay = layout(SINGLE)
    node = lay.nodes["only"]
    # x = MARGIN + PAD; y = MARGIN + TITLE_H + PAD.
    assert (node.x, node.y, node.h) == (26.0, 44.0, 46)
    # "region-1 · slot sharing group region-1" is 38 characters: 6.2 * 38 + 16 - 2 * 14 = 223.6 > 130.
    assert node.w == pytest.approx(223.6)
    (box,) = lay.regions
    assert (box.x, box.y) == (12.0, 12.0)
    assert box.w == pytest.approx(223.6 + 28)
    assert box.h == 18 + 2 * 14 + 46
    assert lay.height == pytest.approx(12 + box.h + 12)


def test_regions_that_share_columns_get_bands_of_their_own() -> None:
    lay = layout(BROADCAST_FORWARD)
    boxes = {b.name: b for b in lay.regions}
    # region-2 spans columns 0-2 and region-1 column 0: they cannot share a band.
    assert boxes["region-1"].y + boxes["region-1"].h < boxes["region-2"].y
    assert [lay.nodes[s].column for s in ("src", "join", "agg")] == [0, 1, 2]
    # Every stage sits inside its region's box.
    for node in lay.nodes.values():
        box = boxes[node.region]
        assert box.x < node.x and node.x + node.w < box.x + box.w
        assert box.y < node.y and node.y + node.h < box.y + box.h


def test_regions_in_disjoint_columns_share_a_band() -> None:
    lay = layout(plan({"r1": ["a"], "r2": ["b"]}, [("a", "b", "blocking", "all_to_all")]))
    first, second = lay.regions
    assert first.y == second.y and first.x + first.w < second.x


def test_two_stages_of_one_region_in_one_column_stack() -> None:
    lay = layout(plan({"r": ["a", "b", "c"]}, [("a", "c", "pipelined", "forward"), ("b", "c", "pipelined", "forward")]))
    assert (lay.nodes["a"].row, lay.nodes["b"].row, lay.nodes["c"].row) == (0, 1, 0)
    assert lay.nodes["b"].y - lay.nodes["a"].y == graph.NODE_H + graph.ROW_GAP


def test_caption_widens_its_node() -> None:
    caption = "P=16 · 2 × 4 cores · 12.5 MiB in and then some more words"
    assert layout(SINGLE, {"only": caption}).nodes["only"].w == pytest.approx(6.0 * len(caption) + 16)


def test_svg_has_stages_regions_and_labelled_edges() -> None:
    svg = graph_svg(BROADCAST_FORWARD, {"join": "P=4"})
    root = ET.fromstring(svg)
    stages = {g.get("data-stage") for g in root.iter(f"{SVG}g") if g.get("class") == "stage"}
    assert stages == {"dim", "src", "join", "agg"}
    regions = [g for g in root.iter(f"{SVG}g") if g.get("class") == "region"]
    assert [r.find(f"{SVG}text").text for r in regions] == [  # type: ignore[union-attr]
        "region-1 · slot sharing group region-1",
        "region-2 · slot sharing group region-2",
    ]
    edges = {
        (g.get("data-producer"), g.get("data-consumer")): g
        for g in root.iter(f"{SVG}g")
        if g.get("class") == "exchange"
    }
    label = {k: g.find(f"{SVG}text").text for k, g in edges.items()}  # type: ignore[union-attr]
    assert label == {
        ("dim", "join"): "blocking · broadcast",
        ("src", "join"): "pipelined · forward",
        ("join", "agg"): "pipelined · forward",
    }
    # Blocking exchanges are dashed, pipelined ones solid.
    assert edges[("dim", "join")].find(f"{SVG}path").get("stroke-dasharray") == "6 4"  # type: ignore[union-attr]
    assert edges[("src", "join")].find(f"{SVG}path").get("stroke-dasharray") is None  # type: ignore[union-attr]
    assert "P=4" in svg


@pytest.mark.security
def test_names_are_escaped() -> None:
    svg = graph_svg(plan({"r<1>": ["a&b"]}, []))
    ET.fromstring(svg)  # well-formed
    assert "a&amp;b" in svg and "r&lt;1&gt;" in svg


def test_empty_plan_draws_an_empty_svg() -> None:
    root = ET.fromstring(graph_svg({"dag_id": "d", "regions": [], "stages": {}, "exchanges": []}))
    assert root.get("width") == "24"
