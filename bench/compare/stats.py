"""Medians over repeats and ratios to the baseline and the oracle: the summary rows the reports show."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.lib.stats import median, ratio

SUMMARY_METRICS: tuple[str, ...] = (
    "wall_s",
    "pipeline_s",
    "apps_wall_s",
    "task_cpu_s",
    "process_cpu_s",
    "tasks",
    "peak_rss_bytes",
)


def summarize(runs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Medians of one variant's successful runs at one scale: totals and per-stage work seconds."""
    ok = [r for r in runs if r.get("ok")]
    summary: dict[str, Any] = {"runs": len(runs), "ok_runs": len(ok)}
    for metric in SUMMARY_METRICS:
        summary[metric] = median([r.get(metric) for r in ok])
    stage_names = sorted({s for r in ok for s in r.get("stages", {})})
    summary["stages"] = {
        stage: {
            key: median([r["stages"].get(stage, {}).get(key) for r in ok])
            for key in ("work_s", "task_s", "tasks", "task_cpu_s")
        }
        for stage in stage_names
    }
    summary["answers_identical"] = bool(ok) and all(r.get("answers_identical") for r in ok)
    return summary


def add_ratios(by_variant: dict[str, dict[str, Any]], baseline: str, oracle: str) -> None:
    """Add ``<metric>_vs_<baseline>`` and ``<metric>_vs_<oracle>`` to every variant's summary, in place."""
    for summary in by_variant.values():
        for reference in (baseline, oracle):
            ref = by_variant.get(reference)
            for metric in ("wall_s", "pipeline_s", "task_cpu_s", "process_cpu_s"):
                summary[f"{metric}_vs_{reference}"] = ratio(summary.get(metric), ref.get(metric) if ref else None)


def _at_most(value: float | None, limit: float | None, factor: float = 1.0) -> bool | None:
    if value is None or limit is None:
        return None
    return value <= factor * limit


TIME_METRICS: dict[str, str] = {"pipeline_s": "pipeline", "wall_s": "whole command"}
"""The times the targets are checked on: the provider's pipeline (its DAG's tasks) and its whole command."""


def targets(
    by_variant: Mapping[str, Mapping[str, Any]],
    *,
    smallest: bool,
    providers: tuple[str, ...] = ("c", "e"),
    metric: str = "wall_s",
) -> dict[str, bool | None]:
    """The issue's targets at one scale for each provider variant present (cold c, warm e); None where a
    variant they compare with is missing.

    ``smallest``: whether this is the smallest scale (the 3x-faster-than-(a) target applies there only).
    ``metric``: the time compared (``wall_s`` or ``pipeline_s``). CPU is Spark's task CPU (event logs);
    "fewer" is strict.
    """

    def get(key: str, name: str) -> float | None:
        value = by_variant.get(key, {}).get(name)
        return None if value is None else float(value)

    out: dict[str, bool | None] = {}
    for p in (p for p in providers if p in by_variant):
        p_time, p_cpu = get(p, metric), get(p, "task_cpu_s")
        if smallest:
            a_time = get("a", metric)
            out[f"{p}_3x_faster_than_a"] = _at_most(p_time, None if a_time is None else a_time / 3)
        out[f"{p}_not_slower_than_b"] = _at_most(p_time, get("b", metric))
        cpus = [get("a", "task_cpu_s"), get("b", "task_cpu_s")]
        out[f"{p}_fewer_cpu_than_a_and_b"] = (
            None if p_cpu is None or None in cpus else all(p_cpu < x for x in cpus if x is not None)
        )
        out[f"{p}_within_1.15x_of_oracle"] = _at_most(p_time, get("oracle", metric), 1.15)
    return out
