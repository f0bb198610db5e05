"""Estimates corrected by history: the TPC-H pipeline run in sequence at growing scales, learning on.

``python -m bench history [options]``: the run sequence (learning on, then uncorrected, then more of each)
on the provider's warm pool under ``airflow dags test``, each run's stages judged against the oracle sweep
and written to ``history.json`` and ``history.md`` after every run; ``--report-only`` writes them again from
``history.json``. The package's docstring (:mod:`bench.history`) describes the sequence.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.compare.runners import RunResult, Setup, prepare_airflow, run_variant, start_pool
from bench.compare.variants import Variant
from bench.history.report import markdown
from bench.history.verdicts import RESULTS, SWEEP_FIELDS, SWEEP_FILE, row, swept, with_sweep
from bench.lib.pipeline import STAGES, scale_key, tables_for
from bench.lib.provider import stop_warm_pools
from bench.lib.report import command_line, machine_info, write_results


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


if __name__ == "__main__":
    raise SystemExit(main())
