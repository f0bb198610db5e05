"""Estimates corrected by history: the TPC-H pipeline run in sequence at growing scales, learning on.

``python -m bench history [--scales 0.01 0.1 0.3 1] [--min-runs 3] [--then 2] [--alternate 3] [--work DIR]``

Each stage runs as its own region (the example DAG with its pipelined edges made blocking, so every stage
has Spark jobs of its own to learn from) on the provider's warm pool, under ``airflow dags test``. Runs
1..k go in sequence at the given scales with ``learn_from_history`` on and ``history_min_runs`` = N; after
N runs every shuffling stage decides from ``bytes x learned expansion``. The last scale is then run once
more with the history not used (``history_min_runs`` = 1000: recorded, never applied): the uncorrected
decision side by side; then ``--then`` more runs at the last scale with the history on, so that a stage that
shuffles only at the last scale (a join broadcast below it) has its N runs too; then ``--alternate`` pairs
of a history-on and an uncorrected run, so that stage times compare at one load. The side-by-side table
sets the newest decisions of each kind against each other, with stage seconds as medians over the runs
after the first uncorrected one that ran the stage at that count. Per stage and run: the decided
parallelism and rule, Spark's spill bytes, the stage's time, the learned factors, and the swept per-stage
best from ``--sweep-file`` (shuffle partitions per stage, AQE off; ``python -m bench compare --sweep-oracle
--sweep-blocking`` and ``python -m bench stage-sweep`` time every stage on its own, as here) where it has
the scale.

Results: bench/results/history.json and history.md. Each run is one sample; each records the machine's load
average before and after it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.compare.runners import RunResult, Setup, prepare_airflow, run_variant, start_pool
from bench.compare.variants import Variant
from bench.lib.pipeline import PIPELINED, REPO, STAGES, scale_key, tables_for
from bench.lib.provider import stop_warm_pools
from bench.lib.report import command_line, machine_info, write_results
from bench.lib.stats import SIGNIFICANCE, slower_p_value

RESULTS = REPO / "bench" / "results"
SWEEP_FILE = RESULTS / "compare-oracle-sweep.json"
NEAR_BEST = 0.05
"""With fewer than TESTED_SAMPLES per candidate: a candidate within 5% of the best time counts as near-best."""
TESTED_SAMPLES = 5
"""With at least this many samples per candidate, near-best is a test instead: not significantly slower than
the fastest (one-sided exact Mann-Whitney, p >= SIGNIFICANCE). A 5% margin is narrower than the spread
of repeated runs here (Q1 at SF 1: 3.98-4.89 s at one partition, 3.95-4.52 s at two), so with enough
samples the data, not a fixed margin, decide which counts are told apart from the best."""
WITHIN = 0.25
"""The goal: the decided parallelism within 25% of the swept best."""


def variant(min_runs: int, label: str) -> Variant:
    env = {
        "AIRFLOW__FINEGRAINED__WARM_POOL": "auto",
        "AIRFLOW__FINEGRAINED__LEARN_FROM_HISTORY": "true",
        "AIRFLOW__FINEGRAINED__HISTORY_MIN_RUNS": str(min_runs),
    }
    return Variant("h", label, "provider", blocking=True, env=env, warm=True)


def history_records(result: RunResult) -> dict[str, dict[str, Any]]:
    """stage -> the history object the run left for it: the record the provider's history keeps, made from the
    stage's trace as the run published it (``planning.run_from_trace``, as the UI and the CLI read it)."""
    from airflow_provider_finegrained.planning import run_from_trace

    run_id = result.metrics["run_id"]
    return {stage: run_from_trace(trace, run_id, True).to_dict() for stage, trace in result.traces.items()}


def swept(scale: str, sweep_file: Path = SWEEP_FILE) -> dict[str, dict[str, Any]]:
    """Per stage at ``scale``: the best candidate, the near-best ones, and the median time of each candidate."""
    data = json.loads(sweep_file.read_text()) if sweep_file.exists() else {}
    if scale not in data:
        return {}
    candidates = data[scale]["candidates"]
    chosen = data[scale].get("best", {})
    samples = {
        stage: {int(p): list(t[stage]) for p, t in candidates.items() if t.get(stage)}
        for stage in STAGES
        if any(t.get(stage) for t in candidates.values())  # a sweep of some stages only (bench/stage_sweep.py)
    }
    pairs: dict[str, str] = {}
    if data[scale].get("blocking"):
        # A forward edge gives producer and consumer one count even when blocking: judge it on their summed
        # time (samples of one round pair up: both stages ran in it).
        for producer, consumer in PIPELINED:
            if producer in samples and consumer in samples:
                both = samples[producer].keys() & samples[consumer].keys()
                summed = {
                    p: [a + b for a, b in zip(samples[producer][p], samples[consumer][p], strict=True)]
                    for p in sorted(both)
                }
                samples[producer] = samples[consumer] = summed
                pairs[producer], pairs[consumer] = consumer, producer
    out: dict[str, dict[str, Any]] = {}
    for stage, timed in samples.items():
        times = {p: statistics.median(v) for p, v in timed.items()}
        fastest = min(times, key=lambda p: times[p])
        # A fused sweep's own choice (a forward pair shares its consumer's), else the fastest candidate.
        best = fastest if data[scale].get("blocking") else int(chosen.get(stage, fastest))
        if min(map(len, timed.values())) >= TESTED_SAMPLES:
            rule = f"not slower than the fastest at p < {SIGNIFICANCE} (one-sided exact Mann-Whitney)"
            near = {p for p, v in timed.items() if slower_p_value(v, timed[fastest]) >= SIGNIFICANCE}
        else:
            rule = f"within {NEAR_BEST:.0%} of the fastest median"
            near = {p for p, s in times.items() if s <= times[fastest] * (1 + NEAR_BEST)}
        if stage in pairs:
            rule += f", on the time summed with its forward partner {pairs[stage]}"
        out[stage] = {
            "best": best,
            "near_best": sorted({best} | near),
            "best_s": times[best],
            "median_s": times,
            "near_best_rule": rule,
        }
    return out


def within(parallelism: int, best: int) -> bool:
    return abs(parallelism - best) <= WITHIN * best


def row(stage: str, record: dict[str, Any], sweep: dict[str, Any] | None) -> dict[str, Any]:
    shuffled = record["shuffle_bytes"] > 0
    out = {
        "stage": stage,
        "parallelism": record["parallelism"],
        "corrected": record.get("learned_work") is not None,
        "learned_work": record.get("learned_work"),
        "learned_memory": record.get("learned_memory"),
        "consumed_bytes": record["consumed_bytes"],
        "shuffle_bytes": record["shuffle_bytes"],
        "work_ratio": record["shuffle_bytes"] / record["consumed_bytes"] if record["consumed_bytes"] else None,
        "spill_bytes": record.get("spilled_bytes", 0),
        "disk_spill_bytes": record.get("disk_spilled_bytes", 0),
        "stage_s": record.get("stage_s"),
        "shuffling": shuffled,
    }
    return with_sweep(out, sweep)


SWEEP_FIELDS = (
    "swept_best",
    "near_best",
    "within_25pct_of_best",
    "within_25pct_of_near_best",
    "near_best_rule",
    "time_vs_best",
)
"""What :func:`with_sweep` adds to a stage's row."""


def with_sweep(stage: dict[str, Any], sweep: dict[str, Any] | None) -> dict[str, Any]:
    """``stage``'s row with the swept best at its scale and whether its parallelism is within 25% of it."""
    if sweep:
        stage.update(
            swept_best=sweep["best"],
            near_best=sweep["near_best"],
            within_25pct_of_best=within(stage["parallelism"], sweep["best"]),
            within_25pct_of_near_best=any(within(stage["parallelism"], p) for p in sweep["near_best"]),
            near_best_rule=sweep.get("near_best_rule"),
        )
        # The decision's price against the best, where the sweep timed the decided count.
        at_decided = sweep.get("median_s", {}).get(stage["parallelism"])
        stage["time_vs_best"] = at_decided / sweep["best_s"] if at_decided and sweep["best_s"] else None
    return stage


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench history", description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=float, nargs="+", default=[0.01, 0.1, 0.3, 1.0])
    parser.add_argument("--min-runs", type=int, default=3)
    parser.add_argument(
        "--then", type=int, default=0, help="history-on runs at the last scale after the uncorrected one"
    )
    parser.add_argument(
        "--alternate",
        type=int,
        default=0,
        help="then this many (history-on, uncorrected) pairs at the last scale, for stage times at one load",
    )
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "finegrained-bench-data")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a new temporary one)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--report-only", action="store_true", help="rewrite history.md from history.json")
    parser.add_argument("--sweep-file", type=Path, default=SWEEP_FILE, help="the oracle sweep to judge against")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report_only:
        report_again(args.results, args.sweep_file)
        return 0
    work = args.work or Path(tempfile.mkdtemp(prefix="finegrained-history-"))
    work.mkdir(parents=True, exist_ok=True)
    home = work / "airflow-home"
    prepare_airflow(home)
    learning = variant(args.min_runs, f"history on, N={args.min_runs}")
    unused = variant(1000, "history recorded, not applied (uncorrected)")
    last = args.scales[-1]
    sequence = [(s, learning) for s in args.scales] + [(last, unused)] + [(last, learning)] * args.then
    sequence += [(last, learning), (last, unused)] * args.alternate
    runs: list[dict[str, Any]] = []
    try:
        print(f"warm pool ready in {start_pool(work, home, learning):.1f} s", flush=True)
        for i, (scale, v) in enumerate(sequence, 1):
            runs.append(run_once(i, scale, v, Setup(tables_for(scale, args.data), work, "local[2]", home), args))
            print(f"run {i} SF {scale_key(scale)} ({v.label}): {runs[-1]['wall_s']:.1f} s", flush=True)
            write(args.results, command_line("history", argv), args.min_runs, runs, args.sweep_file)
    finally:
        stop_warm_pools(home)
    return 0


def run_once(i: int, scale: float, v: Variant, setup: Setup, args: argparse.Namespace) -> dict[str, Any]:
    """Run ``i`` of the sequence: the pipeline once at ``scale``, each stage's decision against the sweep."""
    clock, load = time.perf_counter(), os.getloadavg()
    result = run_variant(setup, v, setup.work / f"run-{i}")
    wall = time.perf_counter() - clock
    records = history_records(result)
    sweep = swept(scale_key(scale), args.sweep_file)
    return {
        "run": i,
        "scale": scale_key(scale),
        "variant": v.label,
        "run_id": result.metrics["run_id"],
        "wall_s": wall,
        "pipeline_s": result.metrics["pipeline_s"],
        "stages": [row(s, records[s], sweep.get(s)) for s in STAGES if s in records],
        "load_before": [round(x, 2) for x in load],
        "load_after": [round(x, 2) for x in os.getloadavg()],
    }


def report_again(results: Path, sweep_file: Path) -> None:
    """history.json and .md again from history.json's runs, judged against ``sweep_file``."""
    doc = json.loads((results / "history.json").read_text())
    for run in doc["runs"]:  # the sweep's verdicts again, as this version of the harness reads them
        sweep = swept(run["scale"], sweep_file)
        run["stages"] = [with_sweep(stage, sweep.get(stage["stage"])) for stage in run["stages"]]
        if sweep:  # a sweep of some stages only says nothing of the others
            for stage in run["stages"]:
                if stage["stage"] not in sweep:
                    for key in SWEEP_FIELDS:
                        stage.pop(key, None)
    doc["sweep_file"] = sweep_file.name
    write_results(results / "history.json", doc, markdown(doc))


def write(results: Path, command: str, min_runs: int, runs: list[dict[str, Any]], sweep_file: Path) -> None:
    doc = {"command": command, "min_runs": min_runs, "machine": machine_info(), "runs": runs}
    doc["sweep_file"] = sweep_file.name
    write_results(results / "history.json", doc, markdown(doc))


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


if __name__ == "__main__":
    raise SystemExit(main())
