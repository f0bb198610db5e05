"""The same-substrate benchmark's parts that need no Spark: the provider's decisions from file sizes, the tables."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench.lib.pipeline import STAGES
from bench.lib.session import SPARK_DEFAULTS, ProviderSizing
from bench.lib.spark_metrics import METRICS
from bench.substrate.__main__ import _summary, render
from bench.substrate.policies import oracle_conf

MiB = 2**20


def _file(path: Path, size: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:
        f.truncate(size)  # only the size is read


def test_the_provider_policy_decides_through_the_provider_s_own_planner(tmp_path: Path) -> None:
    from airflow_provider_finegrained.settings import ConnectionSettings

    tables, out = tmp_path / "tables", tmp_path / "out"
    _file(tables / "lineitem.parquet", 300 * MiB)
    settings = ConnectionSettings.embedded_default(airflow_home=str(tmp_path / "home"), defaults={"warm_pool": "off"})
    sizing = ProviderSizing(tables, out, settings)
    conf = sizing.conf_for("lineitem_projected")
    # 300 MiB / 64 MiB = 4.7 -> 5 tasks before sizing; the decision and the session settings agree.
    decided = sizing.decided["lineitem_projected"]
    assert decided["consumed_bytes"] == 300 * MiB
    assert conf["spark.sql.shuffle.partitions"] == str(decided["parallelism"])
    assert decided["parallelism"] >= math.ceil(300 / 64)
    assert conf["spark.sql.adaptive.enabled"] == "true"
    # Every setting the run's own decision gives the stage, AQE's coalesce floor included (a copy once lacked it).
    assert conf == dict(sizing.decisions["lineitem_projected"].session_conf)
    assert "spark.sql.adaptive.coalescePartitions.minPartitionNum" in conf
    # Its consumer is decided from what the stage wrote in this run (two files here), when it runs.
    _file(out / "lineitem_projected" / "part-0.parquet", 100 * MiB)
    _file(out / "lineitem_projected" / "part-1.parquet", 60 * MiB)
    sizing.conf_for("q1_pricing_summary")
    assert sizing.decided["q1_pricing_summary"]["consumed_bytes"] == 160 * MiB
    # Every key a policy sets starts from Spark's default in each stage.
    assert set(oracle_conf(dict.fromkeys(STAGES, 3), "q3_join")) <= set(SPARK_DEFAULTS)


def _run(wall: float, cpu: float) -> dict[str, Any]:
    stage = {"wall_s": wall / len(STAGES), **dict.fromkeys(METRICS, 1.0), "cpu_time_s": cpu / len(STAGES)}
    return {"wall_s": wall, "stages": dict.fromkeys(STAGES, stage), **dict.fromkeys(METRICS, 8.0), "cpu_time_s": cpu}


def test_the_summary_is_the_median_of_repeats_and_the_table_compares_with_defaults_and_oracle() -> None:
    runs = {"defaults": [_run(30, 4), _run(20, 2), _run(10, 6)], "oracle": [_run(10, 1)], "provider": [_run(15, 3)]}
    summary = {p: _summary(r) for p, r in runs.items()}
    assert summary["defaults"]["wall_s"] == 20 and summary["defaults"]["cpu_time_s"] == 4
    assert summary["defaults"]["wall_range_s"] == [10, 30]
    results = {"command": "x", "pool_start_s": 1, "scales": {"1": {"summary": summary, "answers_identical": True}}}
    table = render(results)
    assert "| 1 | provider | 1 | 15.0 | 15.0 - 15.0 | 0.75x | 1.50x |" in table
    assert "| 1 | defaults | 3 | 20.0 | 10.0 - 30.0 | 1.00x | 2.00x |" in table


def test_a_run_stopped_part_way_still_renders_what_it_measured() -> None:
    # SF 1 finished; SF 10 was stopped after its sweep and one policy's run; SF 30 after its sweep alone.
    done = {p: _summary([_run(10, 2)]) for p in ("defaults", "provider", "oracle")}
    part = {"provider": _summary([_run(100, 20)])}
    scales = {
        "1": {"summary": done, "answers_identical": True},
        "10": {"summary": part, "answers_identical": True},
        "30": {"sweep": {"best": {}}},
    }
    table = render({"command": "x", "pool_start_s": 1, "scales": scales})
    assert "| 10 | provider | 1 | 100.0 | 100.0 - 100.0 | - | - |" in table
    assert "| 30 |" not in table
    stage = STAGES[0]
    # SF 10's per-stage row has a cell for every policy any scale ran, a dash where it did not run.
    assert f"| 10 | {stage} | - | {100 / len(STAGES):.2f} / 1 / {20 / len(STAGES):.2f} / 0.0 / 0.0 | - |" in table
