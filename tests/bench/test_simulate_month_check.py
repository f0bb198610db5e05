"""The month's measured runs against the simulator (bench/simulate/month_check.py): which runs count, the fit
finds the loopback model the runs came from, and a held-out policy off by more than 20% is named."""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from bench.simulate.costs import fit_cost_model
from bench.simulate.loopback import LoopbackModel
from bench.simulate.month_check import MeasuredRun, check, month_policy, read_runs, simulated

GRID = {"background_load": (0.0, 2.0, 4.0), "executor_warmup_cpu_s": (0.0, 4.0, 8.0), "driver_job_cpu_s": (0.0, 1.0)}
"""A small grid holding the model the runs below are made from."""
TRUE_MODEL = {"background_load": 2.0, "executor_warmup_cpu_s": 4.0, "driver_job_cpu_s": 1.0}
COST = fit_cost_model()
BASE = LoopbackModel()


def line(run: MeasuredRun, state: str = "success") -> str:
    return json.dumps(asdict(run) | {"state": state, "day": 0, "reserved_core_s": 1.0})


def made_runs(model: LoopbackModel, scaled: dict[tuple[str, str], float] | None = None) -> list[MeasuredRun]:
    """Every policy at two scales, with the figures ``model`` simulates (a figure times ``scaled``'s factor)."""
    runs = []
    for policy in ("dynamic", "hand", "provider"):
        for scale in (0.05, 0.3):
            blank = MeasuredRun(policy, f"2026-03-0{1 + int(scale > 0.1)}", scale, 1.0, 1.0, 1.0)
            figures = simulated(blank, COST, model)
            for figure, factor in (scaled or {}).items():
                if figure[0] == policy:
                    figures[figure[1]] *= factor
            runs.append(replace(blank, **figures))
    return runs


def test_only_successful_runs_are_read_and_a_missing_file_has_none(tmp_path: Path) -> None:
    ok = MeasuredRun("hand", "2026-03-02", 0.09, 320.0, 629.0, 246.6)
    failed = MeasuredRun("provider", "2026-03-02", 0.09, 82.8, 66.2, 36.1)
    path = tmp_path / "month.jsonl"
    path.write_text("\n".join([line(ok), line(failed, "failed"), ""]))
    assert read_runs(path) == [ok]
    assert read_runs(tmp_path / "absent.jsonl") == []


def test_the_month_policies_are_the_months_and_an_unknown_one_is_refused() -> None:
    hand = month_policy("hand")
    assert (hand.name, hand.fixed_executors, hand.shuffle_partitions, hand.adaptive) == ("fixed", 4, 16, False)
    assert month_policy("dynamic").max_executors == 4
    assert month_policy("provider").name == "provider"
    with pytest.raises(ValueError, match="unknown policy 'fixed'; known: hand, dynamic, provider"):
        month_policy("fixed")


def test_the_fit_finds_the_model_the_runs_came_from_and_every_policy_agrees(tmp_path: Path) -> None:
    model = replace(BASE, **TRUE_MODEL)
    path = tmp_path / "month.jsonl"
    path.write_text("\n".join(line(r) for r in made_runs(model)))
    outcome = check(path, COST, BASE, GRID)
    assert outcome["fitted"] == TRUE_MODEL and outcome["fit_rms_log_error"] == 0
    assert outcome["agrees"] is True and outcome["runs"] == 6
    assert {p: v["runs"] for p, v in outcome["policies"].items()} == {"dynamic": 2, "hand": 2, "provider": 2}
    ratios = {f["median_ratio"] for p in outcome["policies"].values() for f in p["figures"].values()}
    assert ratios == {1.0}


def test_a_held_out_policy_off_by_more_than_the_tolerance_is_named(tmp_path: Path) -> None:
    model = replace(BASE, **TRUE_MODEL)
    path = tmp_path / "month.jsonl"
    # The provider's runs used 30% fewer executor core-seconds than the model says; its wall is 15% off.
    runs = made_runs(model, {("provider", "executor_core_s"): 1 / 0.7, ("provider", "wall_s"): 1 / 0.87})
    path.write_text("\n".join(line(r) for r in runs))
    outcome = check(path, COST, BASE, GRID)
    provider = outcome["policies"]["provider"]["figures"]
    assert provider["executor_core_s"] == {"median_ratio": 0.7, "agrees": False}
    assert provider["wall_s"] == {"median_ratio": 0.87, "agrees": True}
    assert outcome["agrees"] is False and outcome["fitted"] == TRUE_MODEL


def test_without_a_dynamic_run_nothing_is_fitted(tmp_path: Path) -> None:
    path = tmp_path / "month.jsonl"
    path.write_text(line(MeasuredRun("hand", "2026-03-02", 0.09, 320.0, 629.0, 246.6)))
    assert check(path, COST, BASE, GRID) == {
        "file": str(path),
        "runs": 1,
        "agrees": None,
        "note": "no successful dynamic run in month.jsonl to fit on",
    }


def test_the_month_check_command_writes_its_file_and_fails_when_a_policy_disagrees(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.simulate.__main__ import main

    lines = tmp_path / "month.jsonl"
    runs = made_runs(replace(BASE, **TRUE_MODEL), {("hand", "used_core_s"): 2.0})
    runs = [r for r in runs if r.scale == 0.05]  # one run per policy: the command fits on the whole grid
    lines.write_text("\n".join(line(r) for r in runs))
    assert main(["month-check", "--month-lines", str(lines), "--out", str(tmp_path)]) == 1
    written = json.loads((tmp_path / "simulate-month-check.json").read_text())
    assert written["command"].startswith("python -m bench.simulate month-check")
    assert written["policies"]["hand"]["figures"]["used_core_s"]["agrees"] is False
    assert json.loads(capsys.readouterr().out) == written
