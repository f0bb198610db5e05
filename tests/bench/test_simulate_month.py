"""The month replayed on the simulated cluster (bench/simulate/month.py): the recorded days in order at their
scales, the month's hand-sized policy as the month sizes it, spill counted, the goal's check, the command."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.simulate.__main__ import main
from bench.simulate.cluster import ClusterSpec
from bench.simulate.costs import CostModel, fit_cost_model
from bench.simulate.month import PATTERN, MonthSpec, costs_source, goal, read_pattern, replay, vs_best
from bench.simulate.policies import PolicySpec
from bench.simulate.sim import simulate
from bench.simulate.workload import tpch_run

MiB = 2**20
GiB = 2**30


def test_the_pattern_is_read_as_recorded_in_order() -> None:
    recorded = json.loads(PATTERN.read_text())["days"]
    days = read_pattern()
    assert [(d.index, d.date, d.scale, d.spike) for d in days] == [
        (r["index"], r["date"], r["scale"], r["spike"]) for r in recorded
    ]
    assert len(days) == 30 and sum(d.spike for d in days) == 1
    assert read_pattern(days=3) == days[:3]


def test_a_small_month_replays_its_days_in_order_and_only_the_hand_policys_reservation_ignores_the_scale() -> None:
    """Three days around the spike (SF 0.09, 1.15, 0.1), three runs a day on 16 nodes: the hand-sized policy
    holds its 4 executors per application whatever the day's data, so its reserved core-seconds stay put over
    13x the data; the provider's and dynamic allocation's follow the data."""
    days = read_pattern()[9:12]
    cluster = ClusterSpec(16, 16, 64 * GiB, 4, 14 * GiB)
    replayed = replay(days, cluster, fit_cost_model(), MonthSpec(runs_per_day=3, window_s=60.0))
    assert [(d["date"], d["scale"], d["spike"]) for d in replayed] == [
        ("2026-03-11", 0.09, False),
        ("2026-03-12", 1.15, True),
        ("2026-03-13", 0.1, False),
    ]
    reserved = {name: [d["policies"][name]["reserved_core_s"] for d in replayed] for name in ("hand", "provider")}
    assert max(reserved["hand"]) / min(reserved["hand"]) < 1.01
    plain, spike, _ = reserved["provider"]
    assert spike > 1.1 * plain
    assert all(d["policies"][p]["runs"] == 3 for d in replayed for p in ("hand", "dynamic", "provider"))
    assert all(min(d["p50_vs_best"].values()) == 1.0 for d in replayed)


def test_the_hand_policy_runs_its_shuffle_partitions_as_set_and_spilling_tasks_are_counted() -> None:
    """AQE off: 16 shuffle tasks over a small input where AQE coalesces them to one; and on 1 GiB executors a
    big scan's tasks pay the spill term, a small one's do not."""
    small = [tpch_run(0, 0.0, 0.01)]
    cluster = ClusterSpec(4, 16, 64 * GiB, 4, 14 * GiB)
    cost = CostModel()
    hand = simulate(cluster, cost, PolicySpec("fixed", shuffle_partitions=16, adaptive=False), small)
    aqe = simulate(cluster, cost, PolicySpec("fixed", shuffle_partitions=16), small)
    assert hand["tasks"] - aqe["tasks"] == 8 * 15  # every stage's shuffle: 16 tasks against AQE's one
    tiny = ClusterSpec(4, 16, 64 * GiB, 1, 1 * GiB)
    few = PolicySpec("fixed", fixed_executors=1, default_parallelism=1, shuffle_partitions=1, adaptive=False)
    assert simulate(tiny, cost, few, small)["spilled_tasks"] == 0
    spilled = simulate(tiny, cost, few, [tpch_run(0, 0.0, 4.0)])["spilled_tasks"]
    assert 0 < spilled < simulate(tiny, cost, few, [tpch_run(0, 0.0, 4.0)])["tasks"]


def _figures(reserved: float, p50: float, spilled: int = 0) -> dict[str, Any]:
    return {
        "runs": 10,
        "reserved_core_s": reserved,
        "used_core_s": reserved / 2,
        "spilled_tasks": spilled,
        "applications": 80,
        "tasks": 800,
        "wall_s": 1.0,
        "run_latency_s": {"p50": p50, "p95": p50},
    }


def _day(date: str, **policies: tuple[float, float] | tuple[float, float, int]) -> dict[str, Any]:
    figures = {name: _figures(*values) for name, values in policies.items()}
    return {"date": date, "policies": figures, "p50_vs_best": vs_best(figures)}


def test_the_goal_is_met_only_when_every_check_is() -> None:
    met = [
        _day("d1", hand=(1000, 80), dynamic=(400, 90), provider=(300, 82)),
        _day("d2", hand=(1000, 80), dynamic=(400, 90), provider=(300, 88)),  # 1.10x the day's best: allowed
    ]
    outcome = goal(met)
    assert outcome["met"] and outcome["slow_days"] == []
    assert outcome["provider_reserved_vs_hand"] == 0.3 and outcome["provider_slowest_day_vs_best"] == 1.1
    assert outcome["not_modelled"] == ["no_failure", "answers_identical"]
    misses = {
        "reserved_vs_hand": [_day("d1", hand=(1000, 80), dynamic=(900, 90), provider=(800, 80))],
        "reserved_vs_dynamic": [_day("d1", hand=(1000, 80), dynamic=(200, 90), provider=(300, 80))],
        "no_spill": [_day("d1", hand=(1000, 80), dynamic=(400, 90), provider=(300, 80, 5))],
        "no_day_slower_than_1.1x_best": [*met, _day("d3", hand=(1000, 80), dynamic=(400, 70), provider=(300, 78))],
    }
    for check, days in misses.items():
        outcome = goal(days)
        assert not outcome["met"]
        assert [name for name, ok in outcome["checks"].items() if not ok] == [check]
    assert goal(misses["no_day_slower_than_1.1x_best"])["slow_days"] == ["d3"]


def test_the_costs_used_say_whether_the_months_measurements_agree() -> None:
    absent = costs_source(CostModel(), None)
    assert absent["month_lines"] == 0 and absent["month_agrees"] is None and "not been measured" in absent["month_note"]
    unfitted = costs_source(CostModel(), {"runs": 2, "agrees": None, "note": "no successful dynamic run"})
    assert unfitted["month_lines"] == 2 and unfitted["month_note"] == "no successful dynamic run"
    disagrees = costs_source(CostModel(), {"runs": 6, "agrees": False, "tolerance": 0.2})
    assert disagrees["month_agrees"] is False and "do NOT agree within 20%" in disagrees["month_note"]
    assert (
        "held-out policies agree"
        in costs_source(CostModel(), {"runs": 6, "agrees": True, "tolerance": 0.2})["month_note"]
    )


def test_the_month_command_writes_its_results(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["month", "--days", "2", "--runs", "2", "--nodes", "4", "--month-window-s", "30", "--out", str(tmp_path)]
    args += ["--month-lines", str(tmp_path / "none.jsonl")]
    assert main(args) == 0
    doc = json.loads((tmp_path / "simulate-month.json").read_text())
    assert [d["date"] for d in doc["days"]] == ["2026-03-02", "2026-03-03"]
    assert doc["tenant_executors"] == 4 and doc["spec"]["runs_per_day"] == 2
    assert (
        doc["pattern"] == "bench/month/pattern.json"
        and doc["costs"]["month_measurements"] == str(tmp_path / "none.jsonl")
        and "not been measured" in doc["costs"]["month_note"]
    )
    hand = doc["policies"]["hand"]
    assert (hand["fixed_executors"], hand["shuffle_partitions"], hand["adaptive"]) == (4, 16, False)
    assert set(doc["goal"]["checks"]) == {
        "reserved_vs_hand", "reserved_vs_dynamic", "no_spill", "no_day_slower_than_1.1x_best"
    }  # fmt: skip
    text = (tmp_path / "simulate-month.md").read_text()
    assert "| 2026-03-03 | Tue | 0.08 | provider |" in text and "in the model." in text
    assert "2026-03-03 SF 0.08" in capsys.readouterr().err
    with pytest.raises(ValueError, match="tenant_share"):
        MonthSpec(tenant_share=1.0)
