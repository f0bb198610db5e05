"""Where a stage's decision reaches Spark (pure): its own jobs, or an in-region consumer's; cases by hand."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from airflow_provider_finegrained.contract import OutputRecord
from airflow_provider_finegrained.execution.decision import RegionDecision, StageInputs, decide_region
from airflow_provider_finegrained.execution.spark_reach import (
    carried_session_conf,
    runs_own_jobs,
    spark_reach,
)
from airflow_provider_finegrained.planning import ClusterProfile, ParallelismConfig, StageSpec, plan_stages

MiB = 2**20


def stage_session_conf(decision: RegionDecision, stage: str) -> dict[str, str]:
    """The stage's decided session settings (scan settings carried), without AQE's."""
    return {k: v for k, v in decision.stages[stage].session_conf.items() if not k.startswith("spark.sql.adaptive.")}


def conf(partitions: int, split: int = MiB) -> dict[str, str]:
    return {"spark.sql.shuffle.partitions": str(partitions), "spark.sql.files.maxPartitionBytes": str(split)}


@pytest.mark.parametrize(
    ("in_region", "outside", "own"),
    [
        ([], [], True),  # a region's last stage: writes its output
        (["b"], [], False),  # hands over only: no job of its own
        (["b"], ["c"], True),  # also read outside the region: writes (and persists for b)
        ([], ["c"], True),
    ],
)
def test_a_stage_runs_its_own_jobs_when_it_writes(in_region: list[str], outside: list[str], own: bool) -> None:
    assert runs_own_jobs(in_region, outside) is own
    assert runs_own_jobs(in_region, outside, output_path=True)  # an output_path is always written


def test_a_producer_with_an_output_path_is_traced_as_written_and_cached() -> None:
    """Was "no Spark job of its own ... not cached": the region job writes and persists it for its readers."""
    plan = plan_stages(
        [
            StageSpec.build("a"),
            StageSpec.build("b", {"x": {"upstream": "a", "mode": "pipelined"}}),
            StageSpec.build("c", {"x": {"upstream": "a", "mode": "pipelined"}}),
        ]
    )
    region = plan.stages["a"].region
    assert plan.regions[region] == ("a", "b", "c")
    profile = ClusterProfile(total_cores=2, total_memory="6g", executor_memory="4g", local=True)
    config = ParallelismConfig(avg_bytes_per_task="64m")
    lazy = decide_region(plan, region, {}, lambda _: config, profile)
    assert lazy.traces["a"].runs_in == "b"
    assert "not cached" in lazy.traces["a"].sizing_notes[-1]
    written = decide_region(plan, region, {}, lambda _: config, profile, written=["a"])
    assert written.written == frozenset({"a"})
    assert written.traces["a"].runs_in is None
    assert not [n for n in written.traces["a"].sizing_notes if "in-memory handover" in n]
    assert not [n for t in written.traces.values() for n in t.sizing_notes if "plan of 'a'" in n]
    # Its readers run no scans of its: none of its scan settings is carried into their sessions.
    assert stage_session_conf(written, "b") == written.sizing.stages["b"].session_conf()


# (members, in-region consumers, outside consumers) -> runs_in per stage
CASES: list[tuple[str, Sequence[str], Mapping[str, list[str]], Mapping[str, list[str]], dict[str, str | None]]] = [
    ("pair", ["a", "b"], {"a": ["b"], "b": []}, {}, {"a": "b", "b": None}),
    ("producer also written", ["a", "b"], {"a": ["b"], "b": []}, {"a": ["x"]}, {"a": None, "b": None}),
    ("chain of handovers", ["a", "b", "c"], {"a": ["b"], "b": ["c"], "c": []}, {}, {"a": "c", "b": "c", "c": None}),
    (
        "chain through a written stage",
        ["a", "b", "c"],
        {"a": ["b"], "b": ["c"], "c": []},
        {"b": ["x"]},
        {"a": "b", "b": None, "c": None},
    ),
    ("two consumers: the first", ["a", "c", "b"], {"a": ["b", "c"], "b": [], "c": []}, {}, {"a": "c"}),
    ("independent stages", ["a", "b"], {"a": [], "b": []}, {}, {"a": None, "b": None}),
]


@pytest.mark.parametrize(
    ("members", "inside", "outside", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_runs_in_names_the_stage_whose_jobs_run_the_plan(
    members: Sequence[str],
    inside: Mapping[str, list[str]],
    outside: Mapping[str, list[str]],
    expected: dict[str, str | None],
) -> None:
    reach = spark_reach(members, inside, outside, {m: conf(4) for m in members})
    assert {name: reach[name].runs_in for name in expected} == expected
    # A handed-over stage's trace says where it ran, and so does the trace of the stage that ran it.
    for name, runner in expected.items():
        if runner is not None:
            assert (reach[name].note or "").startswith("in-memory handover: no Spark job of its own")
            assert f"{name!r}" in (reach[runner].note or "")


def test_equal_settings_say_the_decision_reaches_spark_in_the_consumer() -> None:
    reach = spark_reach(["a", "b"], {"a": ["b"], "b": []}, {}, {"a": conf(4, 2 * MiB), "b": conf(4, 2 * MiB)})
    assert reach["a"].notes == (
        "in-memory handover: no Spark job of its own; its plan runs inside 'b''s Spark jobs, with its own "
        "settings there (spark.sql.files.maxPartitionBytes 2097152, spark.sql.shuffle.partitions 4), "
        "so its decision reaches Spark",
    )
    assert reach["b"].notes == ("its Spark jobs also run the plan of 'a' (in-memory handover)",)


SCAN_A = {**conf(4, 3 * MiB), "spark.sql.files.openCostInBytes": "65536", "spark.sql.files.minPartitionNum": "4"}


@pytest.mark.parametrize(
    ("b_scans", "b_expected"),
    [
        # b reads only a's DataFrame: the scans in its query are a's, so a's scan settings go with them.
        (False, {**SCAN_A}),
        # b scans files of its own too: one setting serves every scan of the query; b keeps its own.
        (True, conf(4, 2 * MiB)),
    ],
)
def test_a_handed_over_producers_scan_settings_go_where_its_scans_run(
    b_scans: bool, b_expected: dict[str, str]
) -> None:
    inside, confs = {"a": ["b"], "b": []}, {"a": SCAN_A, "b": conf(4, 2 * MiB)}
    scans = {"a": True, "b": b_scans}
    assert carried_session_conf(["a", "b"], inside, {}, confs, scans)[0] == {"a": SCAN_A, "b": b_expected}
    reach = spark_reach(["a", "b"], inside, {}, confs, scans_files=scans)
    if b_scans:
        assert reach["a"].note == (
            "in-memory handover: no Spark job of its own; its plan runs inside 'b''s Spark jobs, under that stage's "
            "settings: spark.sql.files.maxPartitionBytes 2097152 from 'b', not its own 3145728; "
            "spark.sql.files.minPartitionNum unset from 'b', not its own 4; "
            "spark.sql.files.openCostInBytes unset from 'b', not its own 65536"
        )
        assert reach["b"].note == "its Spark jobs also run the plan of 'a' (in-memory handover)"
    else:
        assert (reach["a"].note or "").endswith("so its decision reaches Spark")
        assert reach["b"].note == (
            "its Spark jobs also run the plan of 'a' (in-memory handover), with 'a''s scan settings "
            "(spark.sql.files.*): the file scans are its"
        )


def test_different_settings_are_named_with_both_values() -> None:
    reach = spark_reach(
        ["a", "b"],
        {"a": ["b"], "b": []},
        {},
        {"a": conf(8, 2 * MiB), "b": conf(4, 2 * MiB)},
        {"a": 64 * MiB, "b": 32 * MiB},
    )
    assert reach["a"].note == (
        "in-memory handover: no Spark job of its own; its plan runs inside 'b''s Spark jobs, under that stage's "
        "settings: spark.sql.shuffle.partitions 4 from 'b', not its own 8; "
        f"AQE advisory size {32 * MiB} from 'b', not its own {64 * MiB}"
    )


def test_two_consumers_each_run_the_plan_again() -> None:
    reach = spark_reach(["a", "b", "c"], {"a": ["c", "b"], "b": [], "c": []}, {}, {m: conf(2) for m in "abc"})
    assert reach["a"].runs_in == "b"
    note = reach["a"].note or ""
    assert note.startswith(
        "in-memory handover: no Spark job of its own; its plan runs inside each of 'b', 'c''s Spark jobs "
        "(once per consumer: the handover is not cached)"
    )


def test_decide_region_traces_an_in_memory_producer() -> None:
    """The TPC-H shape: a join handed over, forward and pipelined, to its ordering; one written upstream."""
    plan = plan_stages(
        [
            StageSpec.build("source"),
            StageSpec.build("join", {"rows": "source"}),
            StageSpec.build("order", {"joined": {"upstream": "join", "mode": "pipelined", "distribution": "forward"}}),
        ]
    )
    region = plan.stages["join"].region
    record = OutputRecord("source", "/x", "parquet", [150 * MiB], 10, 1)
    profile = ClusterProfile(total_cores=2, total_memory="6g", executor_memory="4g", local=True)
    decision = decide_region(
        plan,
        region,
        {"join": StageInputs(upstream={"rows": record})},
        lambda _: ParallelismConfig(avg_bytes_per_task="64m"),
        profile,
    )
    join, order = decision.traces["join"], decision.traces["order"]
    assert (join.runs_in, order.runs_in) == ("order", None)
    # Forward: one parallelism (4) for both; join's scans run in order's jobs, with join's scan settings.
    joins = decision.sizing.stages["join"].session_conf()
    assert joins["spark.sql.shuffle.partitions"] == "4"
    assert stage_session_conf(decision, "order") == joins == stage_session_conf(decision, "join")
    # ...and so AQE's sizes derived from join's files (the region job's adaptive_conf reads that balance).
    assert (decision.stages["order"].scans_of, decision.stages["join"].scans_of) == ("join", "join")
    assert decision.sizing.stages["order"].session_conf() != joins  # order's own split size is not join's
    shared = ", ".join(f"{k} {v}" for k, v in sorted(joins.items()))
    assert join.sizing_notes[-1] == (
        "in-memory handover: no Spark job of its own; its plan runs inside 'order''s Spark jobs, with its own "
        f"settings there ({shared}), so its decision reaches Spark"
    )
    assert order.sizing_notes[-1] == (
        "its Spark jobs also run the plan of 'join' (in-memory handover), with 'join''s scan settings "
        "(spark.sql.files.*): the file scans are its"
    )
