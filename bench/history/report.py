"""The history experiment's Markdown: history applied against uncorrected side by side, then one table per run."""

from __future__ import annotations

import statistics
from typing import Any

from bench.history.verdicts import SWEEP_FILE


def _mb(value: int | None) -> str:
    return "-" if value is None else f"{value / 1e6:.2f}"


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _verdict(stage: dict[str, Any]) -> str:
    if "swept_best" not in stage or not stage["shuffling"]:
        return "-"
    if stage["within_25pct_of_best"]:
        return "yes"
    return "near-best only" if stage["within_25pct_of_near_best"] else "no"


def side_by_side(runs: list[dict[str, Any]]) -> list[str]:
    """History-on runs against uncorrected ones at the same scale, per stage (needs both).

    The decided counts are the newest run's of each kind; stage seconds are medians over the uncorrected
    runs and the history-on runs after the first uncorrected one (``--alternate`` interleaves them) that ran
    the stage at that count."""
    plain_runs = [r for r in runs if "uncorrected" in r["variant"]]
    if not plain_runs:
        return []
    scale = plain_runs[-1]["scale"]
    plain_runs = [r for r in plain_runs if r["scale"] == scale]
    later = [
        r for r in runs if r["scale"] == scale and "uncorrected" not in r["variant"] and r["run"] > plain_runs[0]["run"]
    ] or [r for r in runs if r["scale"] == scale and "uncorrected" not in r["variant"]][-1:]
    if not later:
        return []
    corrected = {s["stage"]: s for s in later[-1]["stages"]}
    plain = {s["stage"]: s for s in plain_runs[-1]["stages"]}
    lines = [
        f"## SF {scale}: history applied (runs {_numbers(later)}) against uncorrected (runs {_numbers(plain_runs)})",
        "",
        "| stage | shuffles | P learned | P uncorrected | swept best (near-best) | learned within 25% "
        "| swept time at P learned / best | rule | spill MB learned / uncorrected "
        "| stage s learned / uncorrected (medians) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for stage, c in corrected.items():
        u = plain.get(stage)
        if u is None:
            continue
        best = f"{c['swept_best']} ({', '.join(map(str, c['near_best']))})" if "swept_best" in c else "-"
        price = "-" if c.get("time_vs_best") is None else f"{c['time_vs_best']:.2f}x"
        lines.append(
            f"| {stage} | {'yes' if c['shuffling'] or u['shuffling'] else 'no'} | {c['parallelism']} "
            f"| {u['parallelism']} | {best} | {_verdict(c)} | {price} | {'learned' if c['corrected'] else 'bytes'} "
            f"| {_mb(c['spill_bytes'])} / {_mb(u['spill_bytes'])} "
            f"| {_seconds(_stage_median(later, stage, c['parallelism']))} "
            f"/ {_seconds(_stage_median(plain_runs, stage, u['parallelism']))} |"
        )
    return [*lines, ""]


def _numbers(runs: list[dict[str, Any]]) -> str:
    return ", ".join(str(r["run"]) for r in runs)


def _stage_median(runs: list[dict[str, Any]], stage: str, parallelism: int) -> float | None:
    """The median time of ``stage`` over the ``runs`` that ran it at ``parallelism`` (a stage whose history
    applies only from a later run, such as a join that shuffles only at the largest scale, had other counts
    before)."""
    values = [
        s["stage_s"]
        for r in runs
        for s in r["stages"]
        if s["stage"] == stage and s["stage_s"] is not None and s["parallelism"] == parallelism
    ]
    return statistics.median(values) if values else None


def markdown(doc: dict[str, Any]) -> str:
    lines = [
        "# Estimates corrected by history: TPC-H in sequence at growing scales",
        "",
        f"Command: `{doc['command']}` (N = history_min_runs = {doc['min_runs']}; each run is one sample).",
        "",
        f"Swept best from `{doc.get('sweep_file', SWEEP_FILE.name)}` at the scales it has; at any other, as"
        " recorded with the run.",
        "",
    ]
    lines += side_by_side(doc["runs"])
    for run in doc["runs"]:
        load = (
            f", load average {run['load_before'][0]} before, {run['load_after'][0]} after"
            if "load_before" in run
            else ""
        )
        lines += [
            f"## Run {run['run']}: SF {run['scale']}, {run['variant']} ({run['pipeline_s']:.1f} s pipeline{load})",
            "",
            "| stage | P | rule | learned work | learned memory | consumed MB | shuffle MB | ratio | spill MB "
            "| stage s | swept best (near-best) | within 25% |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|",
        ]
        for s in run["stages"]:
            ratio = "-" if s["work_ratio"] is None else f"{s['work_ratio']:.3g}"
            best = f"{s['swept_best']} ({', '.join(map(str, s['near_best']))})" if "swept_best" in s else "-"
            ok = _verdict(s)
            lines.append(
                f"| {s['stage']} | {s['parallelism']} | {'learned' if s['corrected'] else 'bytes'} "
                f"| {s['learned_work'] or '-'} | {s['learned_memory'] or '-'} | {_mb(s['consumed_bytes'])} "
                f"| {_mb(s['shuffle_bytes'])} | {ratio} | {_mb(s['spill_bytes'])} "
                f"| {_seconds(s['stage_s'])} | {best} | {ok} |"
            )
        lines.append("")
    return "\n".join(lines)
