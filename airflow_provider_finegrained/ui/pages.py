"""Server-rendered HTML of the run page and the history page (inline SVG, no script).

Pure Python, no Airflow imports. Every value from the database goes through ``html.escape``.
"""

from __future__ import annotations

from html import escape
from urllib.parse import quote

from airflow_provider_finegrained.planning.units import format_bytes
from airflow_provider_finegrained.ui.graph import graph_svg
from airflow_provider_finegrained.ui.model import HistoryPoint, HistoryView, RunView, StageRow, format_duration
from airflow_provider_finegrained.ui.plots import (
    Point,
    count_label,
    linear_axis,
    log_bytes_axis,
    scatter_svg,
    seconds_label,
)

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:16px;color:#0f172a;font-size:13px}
h1{font-size:18px;margin:0 0 4px} h2{font-size:15px;margin:18px 0 6px} .sub{color:#475569;margin-bottom:10px}
a{color:#4338ca} .graph{overflow-x:auto;border:1px solid #e2e8f0;border-radius:6px;padding:4px;background:#fff}
table{border-collapse:collapse;width:100%;margin-top:6px}
th,td{border-bottom:1px solid #e2e8f0;padding:4px 6px;text-align:left;vertical-align:top;white-space:nowrap}
th{background:#f1f5f9;font-weight:600;white-space:normal} td.num{text-align:right}
.rule{color:#475569;font-size:11px} .missing{color:#94a3b8;font-style:italic}
.state{font-size:11px;padding:1px 5px;border-radius:8px;background:#e2e8f0} .state-success{background:#dcfce7}
.state-failed,.state-upstream_failed{background:#fee2e2}
.capacity,.carrier{border-bottom:1px dotted #64748b;cursor:help}
.legend{color:#475569;font-size:11px;margin-top:4px} .plots{display:flex;flex-wrap:wrap;gap:12px}
.stage-plots{margin-bottom:8px}
"""


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html><html><head><meta charset='utf-8'>"
        f"<title>{escape(title)}</title><style>{_CSS}</style></head><body>{body}</body></html>"
    )


def run_url(base: str, dag_id: str, run_id: str) -> str:
    return f"{base}/dags/{quote(dag_id, safe='')}/runs/{quote(run_id, safe='')}"


def history_url(base: str, dag_id: str) -> str:
    return f"{base}/dags/{quote(dag_id, safe='')}/history"


def caption(row: StageRow) -> str:
    """What a stage node says under its name on the run page."""
    if not row.has_trace:
        return row.state
    return f"P={row.decided_text} · {row.executors_text} · {row.input_text} in"


def run_page(view: RunView, base: str, task_id: str | None = None) -> str:
    """The plan graph and one table row per stage; ``task_id`` highlights that stage's row."""
    head = (
        f"<h1>Fine-grained plan of {escape(view.dag_id)}</h1>"
        f"<div class='sub'>run <b>{escape(view.run_id)}</b>"
        + (f" · {escape(view.run_state)}" if view.run_state else "")
        + f" · <a href='{escape(history_url(base, view.dag_id))}'>sizing over past runs</a>"
        + f" · <a href='{escape(run_url(base, view.dag_id, view.run_id).replace('/dags/', '/api/dags/', 1))}'>JSON</a>"
        "</div>"
    )
    if view.plan:
        captions = {row.stage: caption(row) for row in view.rows}
        graph = (
            "<h2>Pipelined regions</h2>"
            f"<div class='graph'>{graph_svg(view.plan, captions)}</div>"
            "<div class='legend'>Boxes are pipelined regions (one Spark application each), titled with their slot "
            "sharing group. Solid arrows are pipelined exchanges (in memory), dashed ones blocking (committed, "
            "measured, sized from); green is forward, amber broadcast, grey all-to-all.</div>"
        )
    else:
        graph = "<p class='missing'>No stage of this run published its plan (none has started yet).</p>"
    header = (
        "stage",
        "state",
        "input",
        "decided parallelism",
        "learned from history",
        "planned tasks",
        "executors",
        "executor memory",
        "memory fraction",
        "capacity",
        "carrier",
        "output",
        "duration",
        "Spark application",
    )
    rows = "".join(_run_row(row, highlight=row.stage == task_id) for row in view.rows)
    table = (
        "<h2>Stages of this run</h2><table class='stages'><thead><tr>"
        + "".join(f"<th>{h}</th>" for h in header)
        + f"</tr></thead><tbody>{rows}</tbody></table>"
    )
    return _page(f"{view.dag_id} · {view.run_id}", head + graph + table)


def _run_row(row: StageRow, highlight: bool) -> str:
    def cell(text: str, cls: str = "") -> str:
        missing = text == "–"
        classes = " ".join(c for c in (cls, "missing" if missing else "") if c)
        return f"<td class='{classes}'>{escape(text)}</td>" if classes else f"<td>{escape(text)}</td>"

    def gap(text: str) -> str:
        return " missing" if text == "–" else ""

    inputs = ", ".join(f"{k}: {format_bytes(v)}" for k, v in row.inputs.items())
    decided = escape(row.decided_text)
    if row.rule:
        decided += f"<div class='rule'>{escape(row.rule)}</div>"
    planned = escape(row.planned_text) + "".join(f"<div class='rule'>{escape(n)}</div>" for n in row.sizing_notes)
    where = f" · runs in {row.runs_in}'s Spark jobs" if row.runs_in else ""
    capacity = "–"
    if row.capacity_outcome:
        # The message (asked, free, source) is long: on hover, so the table fits a laptop screen.
        capacity = (
            f"<span class='capacity' title='{escape(row.capacity_message)}'>{escape(row.capacity_outcome)}</span>"
        )
    carrier = cell("–")
    if row.carrier:
        # Warm (a session of the pool) or cold (an application of its own); why, and how its JVMs started, on hover.
        why = row.carrier_reason + (f" · JVMs: {row.jvm}" if row.jvm else "")
        carrier = f"<td><span class='carrier' title='{escape(why)}'>{escape(row.carrier)}</span></td>"
    style = " style='background:#fef9c3'" if highlight else ""
    return (
        f"<tr data-stage='{escape(row.stage)}'{style}>"
        f"<td><b>{escape(row.stage)}</b><div class='rule'>{escape(row.region)} · group {escape(row.slot_sharing_group)}"
        f"{escape(where)}</div></td>"
        f"<td><span class='state state-{escape(row.state.replace(' ', '_'))}'>{escape(row.state)}</span></td>"
        f"<td class='num{gap(row.input_text)}' title='{escape(inputs)}'>{escape(row.input_text)}</td>"
        f"<td class='decided{gap(row.decided_text)}'>{decided}</td>"
        + cell(row.learned_text, "learned")
        + f"<td class='ran{gap(row.planned_text)}'>{planned}</td>"
        + cell(row.executors_text)
        + cell(row.memory_text)
        + cell(row.fraction_text, "num")
        + (f"<td>{capacity}</td>" if row.capacity_outcome else cell("–"))
        + carrier
        + cell(row.output_text, "num")
        + cell(row.duration_text, "num")
        + cell(row.application_id or "–")
        + "</tr>"
    )


_X_LABEL = "input bytes (log scale)"


def history_page(view: HistoryView, base: str) -> str:
    """Two plots per stage: input bytes against decided parallelism and against duration; a third, the
    learned work factor and the measured one over the runs, for a stage that shuffled or was corrected."""
    parts = [
        f"<h1>Sizing over past runs of {escape(view.dag_id)}</h1>",
        f"<div class='sub'>{len(view.runs)} run(s), oldest first; each point is one stage in one run (hover for the "
        f"run) · <a href='{escape(history_url(base, view.dag_id).replace('/dags/', '/api/dags/', 1))}'>JSON</a></div>",
    ]
    if not any(view.stages.values()):
        parts.append("<p class='missing'>No run of this DAG has a stage with a decision trace yet.</p>")
    for stage, points in view.stages.items():
        x = log_bytes_axis([p.input_bytes for p in points])
        by_p = [Point(p.input_bytes, p.decided_parallelism, f"{p.run_id}: P={p.decided_parallelism}") for p in points]
        by_t = [
            Point(p.input_bytes, p.duration_s, f"{p.run_id}: {format_duration(p.duration_s)}")
            for p in points
            if p.duration_s is not None
        ]
        y_p = linear_axis([p.y for p in by_p], count_label, integer=True)
        y_t = linear_axis([p.y for p in by_t], seconds_label)
        parts.append(
            f"<div class='stage-plots' data-stage='{escape(stage)}'><h2>{escape(stage)}</h2><div class='plots'>"
            + scatter_svg(by_p, x, y_p, _X_LABEL, "decided parallelism (tasks)", f"{stage}: parallelism")
            + scatter_svg(by_t, x, y_t, _X_LABEL, "duration (seconds)", f"{stage}: duration")
            + _factor_plot(stage, points)
            + "</div></div>"
        )
    return _page(f"{view.dag_id} · sizing history", "".join(parts))


def _factor_plot(stage: str, points: list[HistoryPoint]) -> str:
    """The work factor over the runs (oldest first, x = run number): the learned one each run decided with
    (hover: ``learned``) and what each run measured (hover: ``measured``); nothing when there is neither."""
    series = [
        Point(i, value, f"{p.run_id}: {kind} {value:.3g}")
        for i, p in enumerate(points, 1)
        for kind, value in (("learned", p.learned_work), ("measured", p.measured_work))
        if value is not None
    ]
    if not series:
        return ""
    x = linear_axis([p.x for p in series], count_label, integer=True)
    y = linear_axis([p.y for p in series], _factor_label)
    return scatter_svg(
        series, x, y, "run (oldest first)", "shuffle bytes per byte on disk", f"{stage}: learned expansion"
    )


def _factor_label(v: float) -> str:
    return f"{v:.3g}"
