"""The comparison harness's pure parts: pipeline table, event logs, answers, medians, ratios, targets, reports."""

from __future__ import annotations

import csv
import importlib
import inspect
import json
import sys
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from bench.compare import oracle
from bench.compare.__main__ import rerender
from bench.compare.report import BEGIN_MARK, END_MARK, quote_in_doc, summary_markdown, write_all
from bench.compare.runners import BLOCKING_DAG_ID, blocking_dag_text
from bench.compare.stats import add_ratios, summarize, targets
from bench.compare.variants import VARIANTS, select
from bench.lib.answers import compare_answers, differences
from bench.lib.pipeline import PIPELINED, STAGE_INPUTS, STAGES, fused_producers, parse_input, scale_key
from bench.lib.provider import first_json
from bench.lib.spark_metrics import SparkWork, parse_event_log, read_event_logs
from bench.lib.stats import median, ratio
from bench.lib.sweep import best_partitions
from tests.conftest import REPO


def test_pipeline_table_matches_the_stage_functions_and_the_dag() -> None:
    sys.path.insert(0, str(REPO / "dags_examples"))
    tpch_queries = importlib.import_module("tpch_queries")

    assert list(STAGES) == list(tpch_queries.STAGES)
    for stage, inputs in STAGE_INPUTS.items():
        params = list(inspect.signature(tpch_queries.STAGES[stage]).parameters)[1:]  # after spark
        assert sorted(params) == sorted(inputs), stage
        for ref in inputs.values():
            kind, name = parse_input(ref)
            if kind == "stage":
                assert STAGES.index(name) < STAGES.index(stage), f"{stage} runs before its input {name}"
    dag = (REPO / "dags_examples" / "tpch_pipeline.py").read_text()
    for producer, consumer in PIPELINED:
        assert f'task_id="{consumer}"' in dag and f'Input({producer}, mode="pipelined"' in dag


def test_parse_input_rejects_unknown_kinds() -> None:
    assert parse_input("table:orders") == ("table", "orders")
    with pytest.raises(ValueError, match="bad input reference"):
        parse_input("file:orders")


def test_pipelined_producers_fuse_only_with_their_consumer_in_the_same_application() -> None:
    assert fused_producers(list(STAGES)) == {"q3_join", "q5_join"}
    assert fused_producers(["q3_join"]) == set()


def test_blocking_copy_of_the_example_dag() -> None:
    text = blocking_dag_text((REPO / "dags_examples" / "tpch_pipeline.py").read_text())
    assert 'mode="pipelined"' not in text
    assert text.count('mode="blocking"') == 2
    assert f'dag_id="{BLOCKING_DAG_ID}"' in text
    with pytest.raises(ValueError, match="example DAG changed"):
        blocking_dag_text("with DAG(dag_id='other'): pass")


def _event(kind: str, **fields: Any) -> str:
    return json.dumps({"Event": kind, **fields})


EVENT_LOG = [
    _event("SparkListenerApplicationStart", **{"App ID": "local-1"}),
    _event("SparkListenerJobStart", **{"Job ID": 0, "Stage IDs": [0, 1], "Properties": {"spark.jobGroup.id": "q1"}}),
    _event("SparkListenerJobStart", **{"Job ID": 1, "Stage IDs": [2], "Properties": {}}),
    _event("SparkListenerTaskEnd", **{"Stage ID": 0, "Task Metrics": {"Executor CPU Time": 2_000_000_000}}),
    _event("SparkListenerTaskEnd", **{"Stage ID": 1, "Task Metrics": {"Executor CPU Time": 500_000_000}}),
    _event(
        "SparkListenerTaskEnd",
        **{"Stage ID": 2, "Task Metrics": {"Executor CPU Time": 1_000_000_000, "Executor Run Time": 1500}},
    ),
    "",
]


def test_event_log_counts_tasks_and_cpu_per_job_group() -> None:
    work = parse_event_log(EVENT_LOG)
    assert (work.applications, work.tasks) == (1, 3)
    assert work.task_cpu_s == pytest.approx(3.5)
    assert work.task_run_s == pytest.approx(1.5)
    assert work.per_group["q1"] == {"tasks": 2, "task_cpu_s": pytest.approx(2.5), "task_run_s": 0.0}
    assert work.per_group["(no group)"]["tasks"] == 1


def test_event_logs_of_a_folder_add_up(tmp_path: Path) -> None:
    for name in ("app-1", "app-2"):
        (tmp_path / name).write_text("\n".join(EVENT_LOG))
    work = read_event_logs(tmp_path)
    assert (work.applications, work.tasks) == (2, 6)
    assert work.per_group["q1"]["tasks"] == 4
    assert read_event_logs(tmp_path / "missing").tasks == 0
    total = SparkWork()
    total.add(work)
    assert total.task_cpu_s == pytest.approx(7.0)


def test_a_growing_log_is_measured_by_difference_and_a_partial_last_line_is_skipped() -> None:
    before = parse_event_log(EVENT_LOG[:4])
    after = parse_event_log([*EVENT_LOG, '{"Event": "SparkListenerTaskEnd", "Stage'])
    since = after.minus(before)
    assert (since.applications, since.tasks) == (0, 2)
    assert since.task_cpu_s == pytest.approx(1.5)
    assert set(since.per_group) == {"q1", "(no group)"}
    assert since.per_group["q1"]["tasks"] == 1


def test_answers_compare_sorted_rows_with_a_float_tolerance() -> None:
    want = [{"k": "A", "v": Decimal("1.000000")}, {"k": "B", "v": Decimal("2.5")}]
    assert differences([{"k": "B", "v": 2.5}, {"k": "A", "v": 1.0000000001}], want, ["k"]) == []
    assert differences([{"k": "A", "v": 1.0}, {"k": "B", "v": 2.6}], want, ["k"]) == ["row 1 v: 2.6 != 2.5"]
    assert differences([{"k": "A", "v": 1.0}], want, ["k"]) == ["1 rows, expected 2"]
    assert differences([{"k": "A", "w": 1}, {"k": "B", "w": 2}], want, ["k"])[0].startswith("columns differ")
    assert differences([{"k": "C", "v": 1.0}, {"k": "B", "v": 2.5}], want, ["k"]) == [
        "row 0 k: 'B' != 'A'",
        "row 0 v: 2.5 != 1.000000",
        "row 1 k: 'C' != 'B'",
        "row 1 v: 1.0 != 2.5",
    ]


def test_compare_answers_per_query() -> None:
    q1 = [{"l_returnflag": "A", "l_linestatus": "F", "sum_qty": 1}]
    q3 = [{"l_orderkey": 1, "o_orderdate": "d", "o_shippriority": 0, "revenue": 3.0}]
    q5 = [{"n_name": "CHINA", "revenue": 5.0}]
    base = {"q1": q1, "q3": q3, "q5": q5}
    assert compare_answers(base, base) == {"q1": [], "q3": [], "q5": []}
    other = {"q1": q1, "q3": q3, "q5": [{"n_name": "CHINA", "revenue": 6.0}]}
    assert compare_answers(base, other)["q5"] == ["row 0 revenue: 6.0 != 5.0"]
    assert compare_answers(base, {"q1": q1, "q3": q3})["q5"] == ["answer missing"]


def test_median_and_ratio_skip_missing_values() -> None:
    assert median([3, None, 1, 2]) == 2
    assert median([None]) is None
    assert ratio(10.0, 4.0) == 2.5
    assert ratio(1.0, 0.0) is None
    assert ratio(None, 1.0) is None


def _run(variant: str, wall: float, cpu: float, ok: bool = True) -> dict[str, Any]:
    return {
        "variant": variant,
        "ok": ok,
        "wall_s": wall,
        "pipeline_s": wall * 0.8,
        "apps_wall_s": wall,
        "task_cpu_s": cpu,
        "process_cpu_s": cpu * 2,
        "tasks": 10,
        "peak_rss_bytes": 2**30,
        "answers_identical": True,
        "stages": {"q1_pricing_summary": {"work_s": wall / 2, "task_s": wall, "tasks": 5, "task_cpu_s": cpu}},
    }


def test_summary_takes_medians_of_successful_runs_and_ratios_to_baseline_and_oracle() -> None:
    a = summarize([_run("a", 90, 30), _run("a", 100, 40), _run("a", 300, 1, ok=False), _run("a", 110, 50)])
    assert (a["runs"], a["ok_runs"], a["wall_s"], a["task_cpu_s"]) == (4, 3, 100, 40)
    assert a["stages"]["q1_pricing_summary"]["work_s"] == 50
    assert a["answers_identical"] is True
    by_variant = {"a": a, "c": summarize([_run("c", 25, 10)]), "oracle": summarize([_run("oracle", 20, 8)])}
    add_ratios(by_variant, "a", "oracle")
    assert by_variant["c"]["wall_s_vs_a"] == 0.25
    assert by_variant["c"]["wall_s_vs_oracle"] == 1.25
    assert by_variant["a"]["task_cpu_s_vs_a"] == 1.0
    assert summarize([_run("b", 1, 1, ok=False)])["answers_identical"] is False


def test_targets_of_the_issue() -> None:
    by_variant = {
        "a": {"wall_s": 90.0, "task_cpu_s": 30.0},
        "b": {"wall_s": 40.0, "task_cpu_s": 12.0},
        "c": {"wall_s": 30.0, "task_cpu_s": 10.0},
        "oracle": {"wall_s": 27.0},
    }
    assert targets(by_variant, smallest=True) == {
        "c_3x_faster_than_a": True,
        "c_not_slower_than_b": True,
        "c_fewer_cpu_than_a_and_b": True,
        "c_within_1.15x_of_oracle": True,
    }
    by_variant["oracle"] = {"wall_s": 25.0}
    by_variant["b"] = {"wall_s": 29.0, "task_cpu_s": 10.0}
    assert targets(by_variant, smallest=False) == {
        "c_not_slower_than_b": False,
        "c_fewer_cpu_than_a_and_b": False,
        "c_within_1.15x_of_oracle": False,
    }
    assert targets({"c": {"wall_s": 1.0}}, smallest=True)["c_3x_faster_than_a"] is None
    warm = targets({"a": {"wall_s": 90.0}, "e": {"wall_s": 20.0}}, smallest=True)
    assert warm["e_3x_faster_than_a"] is True and warm["e_not_slower_than_b"] is None
    assert not any(k.startswith("c_") for k in warm)
    # On the pipeline: the provider's DAG tasks against the baselines' wall (their pipeline is their wall).
    both = {"a": {"wall_s": 90.0, "pipeline_s": 90.0}, "e": {"wall_s": 40.0, "pipeline_s": 25.0}}
    assert targets(both, smallest=True)["e_3x_faster_than_a"] is False
    assert targets(both, smallest=True, metric="pipeline_s")["e_3x_faster_than_a"] is True


def test_oracle_picks_the_fastest_count_per_stage_and_shares_it_along_forward_edges(tmp_path: Path) -> None:
    times = {
        1: {s: [2.0] for s in STAGES} | {"q3_shipping_priority": [9.0]},
        4: {s: [3.0] for s in STAGES} | {"q3_shipping_priority": [1.0], "q3_join": [0.0]},
    }
    best = best_partitions(times)
    assert best["q1_pricing_summary"] == 1
    assert best["q3_shipping_priority"] == best["q3_join"] == 4
    sweep_file = tmp_path / "sweep.json"
    assert oracle.partitions_for(0.01, sweep_file) == (oracle.HAND_TUNED["0.01"], "table")
    sweep_file.write_text(json.dumps({"0.01": {"best": best}}))
    assert oracle.partitions_for(0.01, sweep_file) == (best, "sweep")
    with pytest.raises(KeyError, match="run the sweep"):
        oracle.partitions_for(3.0, sweep_file)
    assert scale_key(1.0) == "1" and scale_key(0.01) == "0.01"


def test_variant_table_selection() -> None:
    assert [v.key for v in select(None)] == ["a", "b", "c", "d", "oracle", "e"]
    assert [v.key for v in select(["e", "a", "e"])] == ["e", "a"]  # the order named is the run order
    with pytest.raises(ValueError, match="unknown variant"):
        select(["z"])
    assert VARIANTS["a"].conf == {"spark.sql.shuffle.partitions": "200", "spark.sql.adaptive.enabled": "false"}
    assert VARIANTS["b"].conf["spark.sql.adaptive.enabled"] == "true"
    assert VARIANTS["d"].blocking and not VARIANTS["c"].blocking
    # (c) and (d) are the cold provider (a spark-submit per region); (e) runs on the warm pool.
    assert VARIANTS["c"].env == VARIANTS["d"].env == {"AIRFLOW__FINEGRAINED__WARM_POOL": "off"}
    assert VARIANTS["e"].warm and VARIANTS["e"].env == {"AIRFLOW__FINEGRAINED__WARM_POOL": "auto"}
    assert not VARIANTS["oracle"].per_stage_apps and VARIANTS["oracle"].oracle


def test_first_json_skips_log_lines() -> None:
    assert first_json('[2026] INFO something\n{"run_id": "r",\n "stages": {}}\n') == {"run_id": "r", "stages": {}}
    with pytest.raises(ValueError, match="no JSON"):
        first_json("nothing here")


def test_reports_are_written_and_say_smoke(tmp_path: Path) -> None:
    runs = [dict(_run("a", 90, 30), scale="0.01", repeat=1), dict(_run("c", 30, 10), scale="0.01", repeat=1)]
    runs.append({"scale": "0.01", "variant": "d", "repeat": 1, "ok": False, "error": "VariantFailed: boom"})
    by_variant = {k: summarize([r for r in runs if r["variant"] == k]) for k in ("a", "c", "d")}
    add_ratios(by_variant, "a", "oracle")
    doc = {
        "smoke": True,
        "command": "python -m bench compare --scales 0.01 --repeats 1",
        "machine": {
            "cpus": 2,
            "memory_bytes": 24 * 2**30,
            "platform": "Linux",
            "python": "3.11",
            "java": "openjdk 17",
            "pyspark": "4.3.0",
            "airflow": "3.3.2",
            "load_avg_1m_at_end": 1.0,
            "date": "today",
        },
        "repeats": 1,
        "scales": ["0.01"],
        "variants": {"a": "fixed", "c": "provider, cold", "d": "provider, cold, separate apps"},
        "summary": {"0.01": by_variant},
        "targets": {"0.01": {m: targets(by_variant, smallest=True, metric=m) for m in ("pipeline_s", "wall_s")}},
        "oracle_partitions": {"0.01": (oracle.HAND_TUNED["0.01"], "table")},
        "runs": runs,
        "warm_pool_start_s": 27.34,
    }
    text = summary_markdown(doc)
    assert text.startswith("**Smoke run**")
    # wall, vs (a), vs oracle, pipeline, vs (a), in spark-submit, task CPU, vs (a), tasks
    assert "| 0.01 | (c) provider, cold | 30.0 | 0.33x | - | 24.0 | 0.33x | 30.0 | 10.0 | 0.33x | 10 |" in text
    assert "warm pool (e) was started before the runs, in 27.3 s" in text
    assert "- scale 0.01, by pipeline: c_3x_faster_than_a: yes" in text
    assert "- scale 0.01, by whole command: c_3x_faster_than_a: yes" in text
    assert "(d) repeat 1: VariantFailed: boom" in text
    paths = write_all(doc, tmp_path / "results", tmp_path / "img" / "bench-compare.png")
    assert [p.name for p in paths] == [
        "compare-results.json",
        "compare-runs.csv",
        "compare-stages.csv",
        "compare-summary.md",
        "bench-compare.png",
    ]
    assert json.loads(paths[0].read_text())["smoke"] is True
    rows = list(csv.DictReader(paths[1].open()))
    assert [(r["variant"], r["ok"]) for r in rows] == [("a", "True"), ("c", "True"), ("d", "False")]
    stage_rows = list(csv.DictReader(paths[2].open()))
    assert {r["stage"] for r in stage_rows} == {"q1_pricing_summary"}
    assert paths[4].read_bytes().startswith(b"\x89PNG")
    # --report-only recomputes the medians from the runs kept in the JSON and writes the same reports.
    summary_before = paths[3].read_text()
    paths[3].unlink()
    rerender(tmp_path / "results", tmp_path / "img" / "bench-compare.png")
    assert paths[3].read_text() == summary_before


def test_the_summary_is_quoted_between_the_markers_of_the_doc() -> None:
    doc = f"# B\n\n{BEGIN_MARK}\nold table\n{END_MARK}\n\nafter\n"
    assert quote_in_doc(doc, "| new |\n") == f"# B\n\n{BEGIN_MARK}\n| new |\n{END_MARK}\n\nafter\n"
    assert quote_in_doc("no markers", "| new |") == "no markers"
    assert BEGIN_MARK in (REPO / "docs" / "benchmarks" / "compare.md").read_text()
