"""The HTML pages from view models: one row per stage, the graph, links, plots, nothing secret."""

from __future__ import annotations

import re

from airflow_provider_finegrained.ui.model import RunInput, history_view, public_trace, run_view
from airflow_provider_finegrained.ui.pages import history_page, history_url, run_page, run_url
from tests.ui.plans import BROADCAST_FORWARD, SINGLE, trace


def _run() -> RunInput:
    return RunInput(
        run_id="manual__2026-01-01T00:00:00+00:00",
        plan=BROADCAST_FORWARD,
        traces={
            "dim": public_trace(trace("dim", {}, 1)),
            "join": public_trace(
                trace(
                    "join",
                    {"dim": 2048, "src": 1024},
                    6,
                    capacity={"outcome": "reduced", "message": "free: 1 core"},
                    execution={"mode": "warm", "reason": "every slot fits", "pool": "sc://127.0.0.1:1"},
                )
            ),
        },
        states={"dim": "success", "src": "success", "join": "success", "agg": "failed"},
        run_state="failed",
    )


def test_run_page_rows_graph_and_links() -> None:
    html = run_page(run_view("d", _run()), "/finegrained", task_id="join")
    assert re.findall(r"<tr data-stage='([^']+)'", html) == ["dim", "src", "join", "agg"]
    join_row = html.split("<tr data-stage='join'")[1].split("</tr>")[0]
    assert "background:#fef9c3" in join_row  # the task instance's stage is highlighted
    assert "<td class='decided'>6<div class='rule'>bytes / avg_bytes_per_task</div></td>" in join_row
    assert "3.0 KiB" in join_row and "title='dim: 2.0 KiB, src: 1.0 KiB'" in join_row
    assert "title='free: 1 core'>reduced</span>" in join_row
    assert "<span class='carrier' title='every slot fits'>warm</span>" in join_row
    agg_row = html.split("<tr data-stage='agg'")[1].split("</tr>")[0]
    assert "state-failed" in agg_row and agg_row.count("missing") == 11
    assert "<svg" in html and 'data-stage="join"' in html and "P=6 · 1 × 2 cores · 3.0 KiB in" in html
    assert "href='/finegrained/dags/d/history'" in html
    assert "/finegrained/api/dags/d/runs/manual__2026-01-01T00%3A00%3A00%2B00%3A00" in html
    assert "spark.secret.key" not in html


def test_run_page_without_plan() -> None:
    html = run_page(run_view("d", RunInput(run_id="r")), "/p")
    assert "No stage of this run published its plan" in html and "<svg" not in html


def test_escaping_of_names() -> None:
    html = run_page(run_view("<d>", RunInput(run_id="<r>", traces={"<s>": trace("<s>", {}, 1)})), "/p")
    assert "&lt;s&gt;" in html and "<s>" not in html
    assert "<r>" not in html and "&lt;r&gt;" in html


def test_history_page_has_a_point_per_run_and_stage() -> None:
    runs = [
        RunInput("r2", plan=SINGLE, traces={"only": trace("only", {"a": 4096}, 4)}),
        RunInput("r1", traces={"only": trace("only", {"a": 1024}, 1)}),
    ]
    html = history_page(history_view("d", runs), "/finegrained")
    section = html.split("data-stage='only'")[1]
    # Two plots (parallelism and duration), each with one point per run.
    assert section.count('class="point"') == 4
    assert "<title>r1: P=1</title>" in section and "<title>r2: P=4</title>" in section
    assert "decided parallelism (tasks)" in section and "duration (seconds)" in section
    assert "input bytes (log scale)" in section


def test_history_page_without_runs() -> None:
    assert "No run of this DAG has a stage with a decision trace yet" in history_page(history_view("d", []), "/p")


def test_urls_quote_run_ids() -> None:
    assert run_url("/f", "d", "a/b:c") == "/f/dags/d/runs/a%2Fb%3Ac"
    assert history_url("/f", "d x") == "/f/dags/d%20x/history"


def _spark(shuffle_read: int) -> dict[str, object]:
    stage = {"stage_id": 1, "attempt": 0, "status": "COMPLETE", "tasks": 2, "per_executor": {"driver": 2},
             "run_time_s": 1.0, "cpu_time_s": 1.0, "shuffle_read_bytes": shuffle_read}  # fmt: skip
    return {"executors": ["driver"], "spark_stages": [stage]}


def test_run_page_shows_the_learned_factor_sizing_notes_and_where_a_stage_ran() -> None:
    learned = trace(
        "join",
        {"src": 10_000},
        3,
        rule="bytes x learned expansion 0.31 (5 runs) / avg_bytes_per_task",
        learned={"work": 0.31, "runs": 5, "memory": 2.4},
        sizing_notes=["memory floor: raised from 2 to 3 so one task's data fits its memory share"],
        runs_in="agg",
    )
    html = run_page(run_view("d", RunInput(run_id="r", traces={"join": learned})), "/p")
    row = html.split("<tr data-stage='join'")[1].split("</tr>")[0]
    assert "<div class='rule'>bytes x learned expansion 0.31 (5 runs) / avg_bytes_per_task</div>" in row
    assert "<td class='learned'>work 0.31 · memory 2.4 (5 runs)</td>" in row
    assert (
        "<div class='rule'>memory floor: raised from 2 to 3 so one task&#x27;s data fits its memory share</div>" in row
    )
    assert "region-1 · group region-1 · runs in agg&#x27;s Spark jobs" in row


def test_history_page_plots_the_learned_and_measured_work_factor_over_runs() -> None:
    rule = "bytes x learned expansion 0.31 (2 runs) / avg_bytes_per_task"
    runs = [
        RunInput("r3", plan=SINGLE, traces={"only": trace("only", {"a": 1000}, 1, spark_tasks=_spark(300),
                 rule=rule, learned={"work": 0.31, "runs": 2})}),
        RunInput("r2", traces={"only": trace("only", {"a": 1000}, 4, spark_tasks=_spark(320))}),
        RunInput("r1", traces={"only": trace("only", {"a": 1000}, 4, spark_tasks=_spark(300))}),
    ]  # fmt: skip
    view = history_view("d", runs)
    assert [(p.run_id, p.learned_work, p.measured_work) for p in view.stages["only"]] == [
        ("r1", None, 0.3),
        ("r2", None, 0.32),
        ("r3", 0.31, 0.3),
    ]
    plots = history_page(view, "/f").split("data-stage='only'")[1].split("<svg")[1:]
    assert len(plots) == 3
    tips = re.findall(r"<title>([^<]+)</title>", plots[2])
    assert tips == ["r1: measured 0.3", "r2: measured 0.32", "r3: learned 0.31", "r3: measured 0.3"]
    assert "shuffle bytes per byte on disk" in plots[2] and "run (oldest first)" in plots[2]
    # A stage that never shuffled nor was corrected keeps its two plots.
    plain = history_page(
        history_view("d", [RunInput("r1", plan=SINGLE, traces={"only": trace("only", {"a": 1}, 1)})]), "/f"
    )
    assert plain.split("data-stage='only'")[1].count("<svg") == 2
