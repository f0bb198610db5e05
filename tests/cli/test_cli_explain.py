"""``finegrained explain`` decides a run's regions again from what their traces recorded, and equals the run.

A run is played here as the runner plays it, region after region (each later region reading the forward
group's value from the traces of those that ran), its traces and plan passed through JSON as XCom stores them;
the end-to-end check on a real run is in tests/operators/test_region_members.py.
"""

from __future__ import annotations

import json
from typing import Any

from airflow_provider_finegrained.cli.explain import COMPARED, differences, explain_results, format_explained
from airflow_provider_finegrained.contract import OutputRecord
from airflow_provider_finegrained.execution.decision import (
    DecisionSettings,
    ExternalSizes,
    StageInputs,
    decide_region,
    forward_group_peers,
)
from airflow_provider_finegrained.execution.region_job import application_conf
from airflow_provider_finegrained.execution.region_trace import (
    CapacityRecord,
    RegionRunFacts,
    launch_record,
    stage_trace,
)
from airflow_provider_finegrained.hooks.settings import ConnectionSettings
from airflow_provider_finegrained.launchers.base import LaunchResult
from airflow_provider_finegrained.planning import LearnedExpansion, StageSpec, plan_stages
from airflow_provider_finegrained.planning.render import plan_to_dict
from airflow_provider_finegrained.secrets import redact_mapping

MiB = 2**20
S = StageSpec.build
FWD = {"mode": "blocking", "distribution": "forward"}
SPECS = [
    S("a"),
    S("b", {"rows": {"upstream": "a", "mode": "pipelined"}}),
    S("c", {"rows": {"upstream": "b", "mode": "pipelined"}}),
    S("y"),
    S("z", {"made": {"upstream": "c", **FWD}, "late": {"upstream": "y", **FWD}}, max_parallelism=6),
]
OWN = {
    "a": {"spark.sql.session.timeZone": "Asia/Tokyo", "spark.eventLog.enabled": "true"},
    "c": {"spark.sql.files.openCostInBytes": "1234567"},
}
FACTS = RegionRunFacts({"mode": "cold"}, CapacityRecord({}), {}, 0.0, LaunchResult(0, "app-1", 1.0))


def play_run(warm: set[str]) -> dict[str, dict[str, Any]]:
    """Each stage's trace and the plan, as XCom holds them after the run (regions in ``warm`` run in a pool)."""
    plan = plan_stages(SPECS, dag_id="d")
    connection = ConnectionSettings.from_connection_fields(
        "spark://127.0.0.1:7077",
        {"total_cores": 8, "spark_conf": {"spark.authenticate.secret": "s3cret"}},
        airflow_home="/srv",
    )
    config = connection.parallelism_config()
    ran: dict[str, int] = {}
    written: dict[str, list[int]] = {}
    results: dict[str, dict[str, Any]] = {}
    for region, members in plan.regions.items():
        inputs: dict[str, StageInputs] = {}
        for m in members:
            outside = [e for e in plan.stages[m].inputs if e.producer not in members]
            upstream = {
                e.input_name: OutputRecord(e.producer, f"/o/{e.producer}", "parquet", written[e.producer], 1, 1)
                for e in outside
            }
            external = (
                {}
                if plan.stages[m].inputs
                else {"t": ExternalSizes(f"/t/{m}", "parquet", [200 * MiB, 90 * MiB, 5 * MiB])}
            )
            inputs[m] = StageInputs(
                upstream, external, upstream_parallelism={e.input_name: ran[e.producer] for e in outside}
            )
        settings = DecisionSettings(
            stage_spark_conf={m: OWN.get(m, {}) for m in members},
            resource_bounds=connection.resource_bounds(),
        )
        decision = decide_region(
            plan, region, inputs, lambda _: config, connection.cluster_profile(),
            {"y": LearnedExpansion(2.0, 3, 4.0)},
            ran_with={p: ran[p] for p in forward_group_peers(plan, region) if p in ran},
            settings=settings,
        )  # fmt: skip
        app = (
            {}
            if region in warm
            else application_conf(
                decision, connection, {"spark.master": "spark://x"}, [OWN.get(m, {}) for m in members]
            )
        )
        for m in members:
            conf = redact_mapping({**app, **decision.session_conf(m)})
            trace = stage_trace(
                decision.stages[m].trace, FACTS, conf, None, first=False, launch=launch_record(decision, m, conf)
            )
            results[m] = json.loads(json.dumps({"trace": trace.to_xcom(), "plan": plan_to_dict(plan)}))
            ran[m] = trace.parallelism
            written[m] = [40 * MiB] * trace.parallelism
    return results


def test_explain_equals_the_run_cold_and_warm_over_a_forward_group_across_regions() -> None:
    for warm in (set(), {"region-1"}, {"region-1", "region-2", "region-3"}):
        results = play_run(warm)
        explained = explain_results(results)
        assert set(explained) == set(results)
        for stage, one in explained.items():
            trace = results[stage]["trace"]
            assert differences(one, trace) == [], (warm, stage)
            assert {k: one.to_dict()[k] for k in COMPARED} == {k: trace[k] for k in COMPARED}
    # The forward group {c, y, z} over three regions was decided once, by c's region.
    assert results["z"]["trace"]["rule"] == "forward edge: same as 'c'"
    assert results["y"]["trace"]["rule"] == "forward group: same as 'c'"
    cold = play_run(set())["a"]["trace"]["spark_conf"]
    assert (cold["spark.authenticate.secret"], cold["spark.eventLog.enabled"]) == ("***", "true")


def test_explain_says_when_a_stage_differs_from_the_run() -> None:
    results = play_run(set())
    results["c"]["trace"]["rule"] = "edited"
    explained = explain_results(results)
    assert differences(explained["c"], results["c"]["trace"]) == ["rule"]
    text = format_explained("d", "r", explained, results)
    assert "stage c (region " in text and "DIFFERS from the run in rule" in text
    assert text.count("same as the run") == len(results) - 1
