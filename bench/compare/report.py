"""Writing the results: JSON (everything), CSV (per run and per stage), a Markdown summary and a PNG plot."""

from __future__ import annotations

import csv
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from bench.compare.stats import SUMMARY_METRICS, TIME_METRICS
from bench.compare.variants import VARIANTS
from bench.lib.report import write_json

RUN_COLUMNS: tuple[str, ...] = (
    "scale",
    "variant",
    "repeat",
    "ok",
    *SUMMARY_METRICS,
    "applications",
    "answers_identical",
    "error",
)
STAGE_COLUMNS: tuple[str, ...] = ("scale", "variant", "repeat", "stage", "work_s", "task_s", "tasks", "task_cpu_s")


def _fmt(value: Any, digits: int = 1) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _ratio(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}x"


def summary_markdown(doc: Mapping[str, Any]) -> str:
    """The Markdown table docs/benchmarks.md quotes: medians per scale and variant, ratios, targets."""
    lines = []
    if doc.get("smoke"):
        lines += ["**Smoke run** (harness check on a shared machine; not a measurement to quote).", ""]
    m = doc["machine"]
    lines += [
        f"Command: `{doc['command']}`  ",
        f"Machine: {m['cpus']} cores, {m['memory_bytes'] / 2**30:.0f} GiB, {m['platform']}, Python {m['python']}, "
        f"{m['java']}, PySpark {m['pyspark']}, Airflow {m['airflow']}; load {m['load_avg_1m_at_end']} at the end; "
        f"{m['date']}. Medians of {doc['repeats']} run(s).",
        "",
        "| scale | variant | wall (s) | vs (a) | vs oracle | pipeline (s) | vs (a) | of it in spark-submit (s) "
        "| task CPU (s) | vs (a) | tasks | process CPU (s) | peak RSS (MiB) | answers identical |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    lines += [
        _summary_row(scale, key, s) for scale, by_variant in doc["summary"].items() for key, s in by_variant.items()
    ]
    return "\n".join([*lines, *_notes(doc)]) + "\n"


def _summary_row(scale: str, key: str, s: Mapping[str, Any]) -> str:
    label = VARIANTS[key].label if key in VARIANTS else key
    rss = s.get("peak_rss_bytes")
    return (
        f"| {scale} | ({key}) {label} | {_fmt(s.get('wall_s'))} | {_ratio(s.get('wall_s_vs_a'))} "
        f"| {_ratio(s.get('wall_s_vs_oracle'))} | {_fmt(s.get('pipeline_s'))} "
        f"| {_ratio(s.get('pipeline_s_vs_a'))} "
        f"| {_fmt(s.get('apps_wall_s'))} | {_fmt(s.get('task_cpu_s'))} "
        f"| {_ratio(s.get('task_cpu_s_vs_a'))} | {_fmt(s.get('tasks'), 0)} | {_fmt(s.get('process_cpu_s'))} "
        f"| {_fmt(None if rss is None else rss / 2**20, 0)} | {_fmt(s.get('answers_identical'))} |"
    )


def _notes(doc: Mapping[str, Any]) -> list[str]:
    """What the summary says below its table: the warm pool's start, the targets, the oracle's partitions,
    failed runs."""
    lines = []
    if doc.get("warm_pool_start_s") is not None:
        lines += [
            "",
            f"The warm pool (e) was started before the runs, in {doc['warm_pool_start_s']:.1f} s, "
            "and kept running: no run of (e) includes its start.",
        ]
    lines += [
        "",
        "Wall: the whole command (for the provider `airflow dags test`, its CLI start included); pipeline: "
        "for the provider its DAG's tasks, first start to last end, for the others the wall.",
        "",
        "Targets for the provider, cold (c) and warm (e):",
        "",
    ]
    for scale, by_metric in doc.get("targets", {}).items():
        for metric, checks in by_metric.items():
            text = ", ".join(f"{name}: {_fmt(ok)}" for name, ok in checks.items())
            lines.append(f"- scale {scale}, by {TIME_METRICS.get(metric, metric)}: {text}")
    oracle = doc.get("oracle_partitions", {})
    if oracle:
        lines += ["", "Oracle shuffle partitions per stage (source):", ""]
        for scale, (parts, source) in oracle.items():
            lines.append(f"- scale {scale} ({source}): " + ", ".join(f"{k}={v}" for k, v in parts.items()))
    failures = [r for r in doc["runs"] if not r.get("ok")]
    if failures:
        lines += ["", "Failed runs:", ""]
        lines += [f"- scale {r['scale']} ({r['variant']}) repeat {r['repeat']}: {r.get('error')}" for r in failures]
    return lines


BEGIN_MARK = "<!-- compare-summary: begin (bench/results/compare-summary.md) -->"
END_MARK = "<!-- compare-summary: end -->"


def quote_in_doc(doc_text: str, summary: str) -> str:
    """``doc_text`` with the part between the summary markers replaced by ``summary``; unchanged without them."""
    start, end = doc_text.find(BEGIN_MARK), doc_text.find(END_MARK)
    if start < 0 or end < start:
        return doc_text
    return doc_text[: start + len(BEGIN_MARK)] + "\n" + summary.rstrip("\n") + "\n" + doc_text[end:]


def write_csv(path: Path, columns: Sequence[str], rows: Sequence[Mapping[str, Any]]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({c: row.get(c) for c in columns})


def stage_rows(runs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """One row per run and stage, for the per-stage CSV."""
    return [
        {"scale": r["scale"], "variant": r["variant"], "repeat": r["repeat"], "stage": stage, **values}
        for r in runs
        for stage, values in r.get("stages", {}).items()
    ]


def plot(doc: Mapping[str, Any], path: Path) -> None:
    """Per scale, bars of end-to-end, pipeline and task CPU seconds per variant (medians)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    scales = list(doc["summary"])
    rows = (("wall_s", "end-to-end (s)"), ("pipeline_s", "pipeline (s)"), ("task_cpu_s", "Spark task CPU (s)"))
    fig, axes = plt.subplots(len(rows), len(scales), figsize=(max(4.2 * len(scales), 7.5), 9), squeeze=False)
    for col, scale in enumerate(scales):
        by_variant = doc["summary"][scale]
        keys = list(by_variant)
        for row, (metric, title) in enumerate(rows):
            ax = axes[row][col]
            values = [by_variant[k].get(metric) or 0.0 for k in keys]
            bars = ax.bar(keys, values, color=["#c44e52" if k == "a" else "#4c72b0" for k in keys])
            ax.bar_label(bars, fmt="%.1f", fontsize=8)
            ax.set_title(f"SF {scale}: {title}", fontsize=10)
            ax.tick_params(axis="x", labelsize=9)
    legend = "; ".join(f"{k}: {v.label}" for k, v in VARIANTS.items() if any(k in s for s in doc["summary"].values()))
    note = " (SMOKE RUN, not a measurement)" if doc.get("smoke") else ""
    fig.suptitle(f"TPC-H Q1/Q3/Q5 pipeline, medians of {doc['repeats']} run(s){note}", fontsize=11)
    fig.text(0.5, 0.01, legend, ha="center", fontsize=7, wrap=True)
    fig.tight_layout(rect=(0, 0.05, 1, 0.96))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_all(doc: Mapping[str, Any], results: Path, image: Path) -> list[Path]:
    """Write compare-results.json, compare-runs.csv, compare-stages.csv, compare-summary.md and the plot."""
    results.mkdir(parents=True, exist_ok=True)
    paths = [
        results / "compare-results.json",
        results / "compare-runs.csv",
        results / "compare-stages.csv",
        results / "compare-summary.md",
        image,
    ]
    write_json(paths[0], doc)
    write_csv(paths[1], RUN_COLUMNS, doc["runs"])
    write_csv(paths[2], STAGE_COLUMNS, stage_rows(doc["runs"]))
    paths[3].write_text(summary_markdown(doc))
    plot(doc, image)
    return paths
