"""The skew benchmark's parts that need no Spark: each variant's settings, the summary and the table."""

from __future__ import annotations

from typing import Any

import pytest

from bench.skew import report, settings
from bench.skew.__main__ import main

MIB = 2**20
# One hot file of 300 MiB among 199 of 1 MiB, and a dimension of 4 files.
FILES = [300 * MIB] + [MIB] * 199
DIM = [MIB] * 4


def test_the_row_groups_variant_runs_the_balance_s_own_settings() -> None:
    balance, decided = settings.decided_conf("balance", FILES, DIM)
    # Only the upstream they read differs (their row groups): split, open cost, AQE and skew sizes agree.
    for variant in settings.ROW_GROUP_VARIANTS:
        assert settings.decided_conf(variant, FILES, DIM) == (balance, decided)
    assert int(balance["spark.sql.files.maxPartitionBytes"]) < 128 * MIB
    sizing, _ = settings.decided_conf("sizing", FILES, DIM)
    assert sizing["spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes"] == str(256 * MIB)
    assert balance["spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes"] != str(256 * MIB)


def _run(variant: str, seconds: float) -> dict[str, Any]:
    decided = {} if variant == "spark-defaults" else {"input_balance": {}}  # as decided_conf records it
    return decided | {
        "variant": variant,
        "seconds": seconds,
        "load_1m": 1.0,
        "scan": {"max_over_median": 1.5},
        "join": {"max_over_median": 1.2},
        "scan_tasks": 8,
        "join_tasks": 12,
    }


_META = {
    "command": "python -m bench skew",
    "machine": "2 cores",
    "date": "d",
    "reps": 3,
    "wall_s": 1,
    "rows": 10,
    "zipf_s": 3.0,
    "keys": 5,
    "hot_key_share": 0.75,
    "files": 200,
    "producer_write_options": {},
    "avg_bytes_per_task": 8 * MIB,
}
_DATA = {name: {"largest_over_median": 2.0} for name in ("default", "balance")}


def test_a_run_of_some_variants_renders_them_and_judges_the_goal_on_the_baselines_it_ran() -> None:
    runs = [_run(v, t) for v, t in [("spark-defaults", 5.0), ("balance", 4.0), (settings.ROW_GROUPS, 3.5)] * 3]
    result = {"meta": _META, "data": _DATA, "runs": runs, "summary": report.summarize(runs)}
    assert list(result["summary"]) == ["spark-defaults", "balance", settings.ROW_GROUPS]
    table = report.render(result)
    assert f"| {settings.ROW_GROUPS} | 3.5 [3.5-3.5] | 8 | 1.5 | 12 | 1.2 | 1.0 |" in table
    assert "| sizing |" not in table
    # The goal compares the balance with the baselines that ran, not with the row-groups variant.
    assert "Faster than spark-defaults: yes (4.0 s against 5.0 s; +20% against the faster of them)." in table
    # Three repetitions each, every default slower than every balance: U = 9 of 9, p = 1/20 (one split of 20).
    assert "spark-defaults p = 0.05: not shown at p < 0.05." in table


def test_the_goal_is_shown_only_when_every_baseline_is_slower_beyond_chance() -> None:
    # Five each: defaults all slower than the balance (p = 1/252); sizing's repetitions interleave the balance's.
    runs = [_run("balance", t) for t in (4.0, 4.1, 4.2, 4.3, 4.4)]
    runs += [_run("spark-defaults", t) for t in (4.5, 4.6, 4.7, 4.8, 4.9)]
    runs += [_run("sizing", t) for t in (3.95, 4.05, 4.15, 4.25, 4.45)]
    result = {"meta": _META, "data": _DATA, "runs": runs, "summary": report.summarize(runs)}
    table = report.render(result)
    # sizing: U = 0 + 1 + 2 + 3 + 5 = 11 of 25; U >= 11 in 1 - P(U <= 10) = 1 - 87/252 = 165/252 of the splits.
    assert "spark-defaults p = 0.00397, sizing p = 0.655: not shown at p < 0.05." in table


def test_an_unknown_variant_is_refused_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--variants", "balance,fastest"])
    known = "spark-defaults, sizing, balance, balance-16m-row-groups, balance-128m-row-groups"
    assert f"--variants: unknown ['fastest']; known: {known}" in capsys.readouterr().err
