"""plan_stages: validation with stage names in every message, regions, groups, fractions, rendering."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from airflow_provider_finegrained.planning import ResourceSpec, StageGraphError, StageSpec, plan_stages
from airflow_provider_finegrained.planning.render import plan_to_dict, plan_to_dot, plan_to_json, plan_to_table

S = StageSpec.build


def diamond() -> list[StageSpec]:
    """src -(pipelined, forward)-> left; src -> right (blocking); left, right -> sink (blocking)."""
    return [
        S("src"),
        S("left", {"src": {"upstream": "src", "mode": "pipelined", "distribution": "forward"}}),
        S("right", {"src": "src"}),
        S("sink", {"l": "left", "r": {"upstream": "right", "distribution": "broadcast"}}),
    ]


def test_diamond_regions_groups_and_fractions() -> None:
    plan = plan_stages(diamond(), dag_id="d")
    assert plan.regions == {"region-1": ("src", "left"), "region-2": ("right",), "region-3": ("sink",)}
    assert plan.forward_groups == (("src", "left"), ("right",), ("sink",))
    # Unknown resources: 1 / n within each region's slot sharing group.
    assert {n: s.memory_fraction for n, s in plan.stages.items()} == {
        "src": 0.5,
        "left": 0.5,
        "right": 1.0,
        "sink": 1.0,
    }
    assert [e.input_name for e in plan.stages["sink"].inputs] == ["l", "r"]


def test_specified_fractions_are_managed_memory_over_group_sum() -> None:
    spec = [
        S("a", resources={"cpu_cores": 1, "heap_memory": "1g", "managed_memory": "300m"}),
        S("b", {"a": {"upstream": "a", "mode": "pipelined"}}, resources=ResourceSpec(1, "1g", managed_memory="100m")),
    ]
    plan = plan_stages(spec)
    assert plan.stages["a"].memory_fraction == 0.75
    assert plan.stages["b"].memory_fraction == 0.25


def test_memory_weights_share_unknown_stages() -> None:
    spec = [S("a", memory_weight=3), S("b", {"a": {"upstream": "a", "mode": "pipelined"}})]
    plan = plan_stages(spec)
    assert (plan.stages["a"].memory_fraction, plan.stages["b"].memory_fraction) == (0.75, 0.25)


def test_forward_group_inherits_fixed_parallelism() -> None:
    spec = [S("a", parallelism=4), S("b", {"a": {"upstream": "a", "distribution": "forward"}})]
    plan = plan_stages(spec)
    assert plan.stages["b"].fixed_parallelism == 4


def test_user_slot_sharing_group_is_respected_across_regions() -> None:
    spec = [S("a", slot_sharing_group="shared"), S("b", {"a": "a"}, slot_sharing_group="shared")]
    plan = plan_stages(spec)
    assert len(plan.regions) == 2
    assert {s.slot_sharing_group for s in plan.stages.values()} == {"shared"}
    assert plan.stages["a"].memory_fraction == 1.0  # the two regions never run at once


PIPE = {"mode": "pipelined"}
# Stages, then each one's fraction, by hand: shares are taken per pipelined region within the group
# (FLIP-53: only stages that may run at the same time share a slot's memory), never across the group's regions.
SPANNING_GROUP_CASES = [
    # a -> b blocking: regions {a}, {b}, both in "g": each alone in its region (was 1/2 each).
    pytest.param(
        [S("a", slot_sharing_group="g"), S("b", {"x": "a"}, slot_sharing_group="g")],
        {"a": 1.0, "b": 1.0},
        id="two-regions-of-one",
    ),
    # a -> b pipelined, b -> c blocking: regions {a, b}, {c}: 1/2, 1/2 and 1 (was 1/3 each).
    pytest.param(
        [
            S("a", slot_sharing_group="g"),
            S("b", {"x": {"upstream": "a", **PIPE}}, slot_sharing_group="g"),
            S("c", {"x": "b"}, slot_sharing_group="g"),
        ],
        {"a": 0.5, "b": 0.5, "c": 1.0},
        id="a-region-of-two-and-one-of-one",
    ),
    # Managed memory 300m and 100m pipelined, 200m in a later region: 300/400, 100/400, 200/200
    # (was 300/600, 100/600, 200/600).
    pytest.param(
        [
            S("a", slot_sharing_group="g", resources={"cpu_cores": 1, "heap_memory": "1g", "managed_memory": "300m"}),
            S(
                "b",
                {"x": {"upstream": "a", **PIPE}},
                slot_sharing_group="g",
                resources={"cpu_cores": 1, "heap_memory": "1g", "managed_memory": "100m"},
            ),
            S(
                "c",
                {"x": "b"},
                slot_sharing_group="g",
                resources={"cpu_cores": 1, "heap_memory": "1g", "managed_memory": "200m"},
            ),
        ],
        {"a": 0.75, "b": 0.25, "c": 1.0},
        id="managed-memory",
    ),
    # Weights 3 and 1 pipelined, 2 in a later region: 3/4, 1/4, 2/2 (was 3/6, 1/6, 2/6).
    pytest.param(
        [
            S("a", slot_sharing_group="g", memory_weight=3.0),
            S("b", {"x": {"upstream": "a", **PIPE}}, slot_sharing_group="g", memory_weight=1.0),
            S("c", {"x": "b"}, slot_sharing_group="g", memory_weight=2.0),
        ],
        {"a": 0.75, "b": 0.25, "c": 1.0},
        id="weights",
    ),
]


@pytest.mark.parametrize(("specs", "expected"), SPANNING_GROUP_CASES)
def test_slot_sharing_group_spanning_two_regions_keeps_each_regions_memory_fractions(
    specs: list[StageSpec], expected: dict[str, float]
) -> None:
    plan = plan_stages(specs)
    assert len(plan.regions) == 2
    assert {s.slot_sharing_group for s in plan.stages.values()} == {"g"}
    assert {n: s.memory_fraction for n, s in plan.stages.items()} == expected


def test_managed_memory_fractions_by_region_within_a_group() -> None:
    from airflow_provider_finegrained.planning import managed_memory_fractions

    specs: dict[str, ResourceSpec | None] = {"a": None, "b": None, "c": None}
    groups = dict.fromkeys(specs, "g")
    assert managed_memory_fractions(specs, groups) == {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3}
    regions = {"a": "region-1", "b": "region-1", "c": "region-2"}
    assert managed_memory_fractions(specs, groups, regions=regions) == {"a": 0.5, "b": 0.5, "c": 1.0}


def test_all_sources_in_one_region_option() -> None:
    spec = [S("a"), S("b"), S("c", {"a": "a", "b": "b"})]
    assert len(plan_stages(spec).regions) == 3
    assert plan_stages(spec, all_sources_in_one_region=True).regions == {"region-1": ("a", "b"), "region-2": ("c",)}


@pytest.mark.parametrize(
    ("build", "message"),
    [
        pytest.param(
            lambda: [S("a", {"x": "ghost"})],
            "stage 'a' reads input 'x' from 'ghost', which is not a stage",
            id="unknown-upstream",
        ),
        pytest.param(
            lambda: [S("a"), S("b", {"x": {"upstream": "a", "mode": "streaming"}})],
            "stage 'b': input 'x': unknown exchange mode 'streaming'; allowed values: 'blocking', 'pipelined'",
            id="unknown-exchange-mode",
        ),
        pytest.param(
            lambda: [S("a"), S("b", {"x": {"upstream": "a", "distribution": "hash"}})],
            "stage 'b': input 'x': unknown distribution 'hash'",
            id="unknown-distribution",
        ),
        pytest.param(
            lambda: [S("a"), S("b", {"x": {"upstream": "a", "partitioner": "hash"}})],
            "stage 'b': input 'x' needs 'upstream'",
            id="unknown-input-key",
        ),
        pytest.param(
            lambda: [S("a", resources={"cpu_cores": 1, "heap_memory": "1g"}), S("b", {"a": "a"})],
            "stage 'a' declares a ResourceSpec but stage 'b' does not",
            id="mixed-resource-specs",
        ),
        pytest.param(
            lambda: [S("a", resources={"cpu_cores": 0, "heap_memory": "1g"})],
            "stage 'a': ResourceSpec cpu_cores must be greater than 0",
            id="zero-cpu",
        ),
        pytest.param(
            lambda: [S("a", parallelism=4), S("b", {"a": {"upstream": "a", "distribution": "forward"}}, parallelism=8)],
            "stage 'a' has parallelism 4 but stage 'b' has parallelism 8",
            id="conflicting-forward-group",
        ),
        pytest.param(
            lambda: [
                S("a", min_parallelism=10),
                S("b", {"a": {"upstream": "a", "distribution": "forward"}}, max_parallelism=5),
            ],
            "stage 'a' has min_parallelism 10 and stage 'b' has max_parallelism 5",
            id="forward-bounds-disjoint",
        ),
        pytest.param(
            lambda: [S("a", min_parallelism=8, max_parallelism=4)],
            r"stage 'a': min_parallelism \(8\) is above max_parallelism \(4\)",
            id="min-above-max",
        ),
        pytest.param(
            lambda: [S("a", parallelism=100, max_parallelism=10)],
            "stage 'a': parallelism 100 is outside",
            id="fixed-outside-bounds",
        ),
        pytest.param(
            lambda: [S("a", parallelism=0)], "stage 'a': parallelism must be an integer >= 1", id="zero-parallelism"
        ),
        pytest.param(lambda: [S("a"), S("a")], "two stages are named 'a'", id="duplicate"),
        pytest.param(
            lambda: [S("a", {"b": "b"}), S("b", {"a": "a"})], r"stages \['a', 'b'\] read from each other", id="cycle"
        ),
        pytest.param(lambda: [S("a", {"self": "a"})], "stage 'a' reads its own output", id="self-loop"),
        pytest.param(
            lambda: [
                S("a", slot_sharing_group="g1"),
                S("b", {"a": {"upstream": "a", "mode": "pipelined"}}, slot_sharing_group="g2"),
            ],
            "stages 'a' \\(slot sharing group 'g1'\\) and 'b' \\(group 'g2'\\) are pipelined into one region",
            id="region-split-across-groups",
        ),
    ],
)
def test_invalid_declarations_name_the_stages(build: object, message: str) -> None:
    with pytest.raises(StageGraphError, match=message):
        plan_stages(build())  # type: ignore[operator]


def test_render_json_round_trips_and_names_everything() -> None:
    plan = plan_stages(diamond(), dag_id="d")
    data = json.loads(plan_to_json(plan))
    assert data == plan_to_dict(plan)
    assert data["regions"][0] == {"name": "region-1", "slot_sharing_group": "region-1", "stages": ["src", "left"]}
    assert data["stages"]["sink"]["memory_fraction"] == 1.0
    assert {
        "producer": "right",
        "consumer": "sink",
        "mode": "blocking",
        "distribution": "broadcast",
        "input": "r",
    } in data["exchanges"]


def test_render_table_lists_every_stage_in_region_order() -> None:
    table = plan_to_table(plan_stages(diamond(), dag_id="d"))
    lines = table.splitlines()
    assert lines[0] == "DAG d: 4 stages, 3 pipelined regions, 3 forward groups"
    assert [line.split()[0] for line in lines[3:7]] == ["src", "left", "right", "sink"]
    assert "src -> left (src): pipelined, forward" in table


def test_render_dot_has_a_cluster_per_region_and_edge_styles() -> None:
    dot = plan_to_dot(plan_stages(diamond(), dag_id="d"))
    assert dot.count("subgraph cluster_") == 3
    assert '"src" -> "left" [style=solid, arrowhead=empty, label="pipelined/forward"];' in dot
    assert '"right" -> "sink" [style=dashed, arrowhead=diamond, label="blocking/broadcast"];' in dot
    dot_binary = subprocess.run(["which", "dot"], capture_output=True, text=True).stdout.strip()
    if dot_binary:  # when Graphviz is installed, it must accept the output
        subprocess.run([dot_binary, "-Tsvg"], input=dot, text=True, check=True, capture_output=True)


def test_planning_imports_neither_airflow_nor_spark() -> None:
    code = (
        "import sys, airflow_provider_finegrained.planning, airflow_provider_finegrained.planning.render\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('airflow', 'pyspark', 'py4j'))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
