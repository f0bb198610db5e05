"""The month's result lines: totals, the goal of issue 33 item 3 and resuming, from hand-made lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.month import pattern
from bench.month.__main__ import parse_args, plan, remaining
from bench.month.report import markdown
from bench.month.results import append_line, by_day, done, goal, read_lines, slowdowns, summarize, totals

POLICIES = ("hand", "dynamic", "provider")


def line(policy: str, date: str, reserved: float, wall: float, **extra: Any) -> dict[str, Any]:
    base = {
        "policy": policy,
        "date": date,
        "weekday": "Mon",
        "scale": 0.1,
        "reserved_core_s": reserved,
        "used_core_s": reserved / 2,
        "wall_s": wall,
        "disk_spilled_bytes": 0,
        "memory_spilled_bytes": 0,
        "ok": True,
        "failed_applications": 0,
        "answers_identical": True,
    }
    return base | extra


def month(provider: dict[str, Any] | None = None, reserved: float = 60) -> list[dict[str, Any]]:
    """Two days: hand 100 core-s a day, dynamic 80, the provider ``reserved``; walls 50, 48, 52."""
    out = []
    for date in ("2026-03-02", "2026-03-03"):
        out += [line("hand", date, 100, 50), line("dynamic", date, 80, 48)]
        out.append(line("provider", date, reserved, 52, **(provider or {})))
    return out


def test_totals_sum_each_policys_days() -> None:
    total = totals(by_day(month()), POLICIES)
    assert total["hand"]["reserved_core_s"] == 200 and total["hand"]["used_core_s"] == 100
    assert total["provider"]["wall_s"] == 104 and total["provider"]["days"] == 2
    assert total["dynamic"]["failures"] == 0 and total["dynamic"]["wrong_answers"] == 0


def test_the_goal_is_met_by_a_provider_25_percent_below_hand_and_below_dynamic_within_1_1x() -> None:
    result = goal(by_day(month()), POLICIES)
    assert result["met"] and result["complete_days"] == 2
    assert result["provider_reserved_vs_hand"] == pytest.approx(0.6)
    assert result["provider_reserved_vs_dynamic"] == pytest.approx(0.75)
    assert result["provider_slowest_day_vs_best"] == pytest.approx(52 / 48)


@pytest.mark.parametrize(
    ("provider", "reserved", "missed"),
    [
        ({}, 76, {"reserved_vs_hand"}),  # 0.76x hand: not 25% below
        ({}, 74, set()),
        ({}, 81, {"reserved_vs_hand", "reserved_vs_dynamic"}),
        ({"wall_s": 53}, 60, {"no_day_slower_than_1.1x_best"}),  # 53 / 48 = 1.104
        ({"disk_spilled_bytes": 1}, 60, {"no_spill"}),
        ({"ok": False}, 60, {"no_failure"}),
        ({"failed_applications": 1}, 60, {"no_failure"}),
        ({"answers_identical": False}, 60, {"answers_identical"}),
    ],
)
def test_each_part_of_the_goal_can_miss(provider: dict[str, Any], reserved: float, missed: set[str]) -> None:
    result = goal(by_day(month(provider, reserved)), POLICIES)
    assert {name for name, ok in result["checks"].items() if not ok} == missed
    assert result["met"] is not missed


def test_a_failed_run_is_not_the_days_best() -> None:
    days = by_day([line("hand", "d", 1, 10, ok=False), line("dynamic", "d", 1, 40), line("provider", "d", 1, 42)])
    assert slowdowns(days, "provider") == {"d": pytest.approx(42 / 40)}


def test_days_without_every_policy_are_left_out_of_the_goal() -> None:
    lines = [*month(), line("hand", "2026-03-04", 1000, 50)]
    result = summarize(lines, POLICIES)
    assert result["days_measured"] == 3 and result["goal"]["complete_days"] == 2
    assert result["totals"]["hand"]["reserved_core_s"] == 1200  # the totals count every day measured
    assert goal(by_day(lines[-1:]), POLICIES) == {"complete_days": 0, "checked": False}


def test_lines_are_appended_one_json_each_and_a_partial_last_one_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "results" / "month.jsonl"
    assert read_lines(path) == []
    for item in month()[:2]:
        append_line(path, item)
    with path.open("a") as out:
        out.write('{"policy": "provider", "da')  # a session killed mid-write
    assert read_lines(path) == month()[:2]
    assert done(read_lines(path)) == {("hand", "2026-03-02"), ("dynamic", "2026-03-02")}


def test_resume_skips_what_the_lines_hold_and_keeps_the_order(tmp_path: Path) -> None:
    args = parse_args(["--days", "2", "--lines", str(tmp_path / "m.jsonl")])
    todo = plan(args, POLICIES)
    days = pattern.load()
    assert [(d.date, p) for d, _, p in todo] == [
        (days[0].date, "hand"), (days[0].date, "dynamic"), (days[0].date, "provider"),
        (days[1].date, "dynamic"), (days[1].date, "provider"), (days[1].date, "hand"),
    ]  # fmt: skip
    assert [s for _, s, _ in todo] == [days[0].scale] * 3 + [days[1].scale] * 3
    left = remaining(todo, {("hand", days[0].date), ("provider", days[1].date)})
    assert [(d.index, p) for d, _, p in left] == [(0, "dynamic"), (0, "provider"), (1, "dynamic"), (1, "hand")]


def test_scales_can_be_given_for_a_smoke_run(tmp_path: Path) -> None:
    args = parse_args(["--days", "2", "--scales", "0.01,0.02"])
    assert sorted({s for _, s, _ in plan(args, POLICIES)}) == [0.01, 0.02]
    with pytest.raises(SystemExit, match="2 days"):
        plan(parse_args(["--days", "2", "--scales", "0.01"]), POLICIES)


def test_the_report_has_a_row_per_run_the_totals_and_the_goal() -> None:
    lines = month({"wall_s": 60}, 60)
    doc = {
        "command": "python -m bench month",
        "cluster": "loopback yarn",
        "tenant": "2 executors",
        "policies": {p: {} for p in POLICIES},
        "lines": lines,
        "summary": summarize(lines, POLICIES),
    }
    text = markdown(json.loads(json.dumps(doc)))
    assert text.count("| 2026-03-0") == 6
    assert "| provider | 2 | 120 | 60 | 120 |" in text
    assert "no_day_slower_than_1.1x_best: **missed**" in text and "Goal **missed**." in text
    assert "1.25x that day's best" in text


def test_a_failed_run_measured_again_is_superseded_and_named() -> None:
    first = line("provider", "2026-03-02", 30, 80, ok=False, run_id="first")
    again = line("provider", "2026-03-02", 60, 52, run_id="again")
    still_failed = line("hand", "2026-03-03", 100, 50, ok=False, run_id="hand-failed")
    lines = [*month(), first, still_failed]
    # --resume alone skips every pair measured; --rerun-failed runs again those whose last line failed.
    assert ("provider", "2026-03-02") in done(lines) and ("hand", "2026-03-03") in done(lines)
    left = done(lines, rerun_failed=True)
    assert ("provider", "2026-03-02") not in left and ("hand", "2026-03-03") not in left
    assert ("dynamic", "2026-03-02") in left
    lines.append(again)
    assert ("provider", "2026-03-02") in done(lines, rerun_failed=True)
    summary = summarize(lines, POLICIES)
    assert summary["superseded_failures"] == [{"policy": "provider", "date": "2026-03-02", "run_id": "first"}]
    assert summary["totals"]["provider"]["failures"] == 0 and summary["totals"]["hand"]["failures"] == 1
    doc = {"command": "c", "cluster": "x", "tenant": "t", "policies": {p: {} for p in POLICIES}, "lines": lines}
    text = markdown(json.loads(json.dumps(doc | {"summary": summary})))
    assert (
        "Failed runs measured again (their lines stay in the lines file; the table and totals hold the new run): "
        "provider 2026-03-02." in text
    )
    assert text.count("| 2026-03-02 |") == 3
