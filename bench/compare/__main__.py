"""The one command: every variant at every scale, repeated, then results, summary and plot.

``python -m bench compare [--scales 0.01 0.1 1] [--repeats 3] [--variants a b c d oracle e] [--sweep-oracle]``
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.compare import oracle
from bench.compare.report import quote_in_doc, write_all
from bench.compare.runners import Setup, prepare_airflow, run_variant, start_pool
from bench.compare.stats import TIME_METRICS, add_ratios, summarize, targets
from bench.compare.variants import BASELINE, ORACLE, VARIANTS, Variant, select
from bench.lib.answers import Rows, compare_answers
from bench.lib.pipeline import REPO, STAGES, scale_key, tables_for
from bench.lib.provider import stop_warm_pools
from bench.lib.report import command_line, machine_info, write_json
from bench.lib.sweep import SWEEP_CANDIDATES, alternating, load_sweep, sweep_entry
from bench.lib.sweep import sweep as sweep_candidates

RESULTS = REPO / "bench" / "results"
IMAGE = REPO / "docs" / "img" / "bench-compare.png"
SWEEP_FILE = RESULTS / "compare-oracle-sweep.json"
DOC = REPO / "docs" / "benchmarks" / "compare.md"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench compare", description=__doc__.splitlines()[0])
    parser.add_argument("--scales", type=float, nargs="+", default=[0.01, 0.1, 1.0], help="TPC-H scale factors")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each variant at each scale (medians)")
    parser.add_argument("--variants", nargs="+", help=f"variants to run, of {', '.join(VARIANTS)} (default: all)")
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "finegrained-bench-data")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a new temporary one)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--image", type=Path, default=IMAGE)
    parser.add_argument("--sweep-oracle", action="store_true", help="sweep the oracle's partitions first")
    parser.add_argument("--sweep-repeats", type=int, default=1)
    parser.add_argument(
        "--sweep-candidates",
        type=int,
        nargs="+",
        default=list(SWEEP_CANDIDATES),
        help="the partition counts swept",
    )
    parser.add_argument(
        "--sweep-blocking",
        action="store_true",
        help="sweep with every stage's output written (none handed over in memory): each stage's own best",
    )
    parser.add_argument(
        "--sweep-file",
        type=Path,
        default=SWEEP_FILE,
        help="where the sweep is written and the oracle's partitions read",
    )
    parser.add_argument("--no-plan-scaling", action="store_true", help="skip the planner's scaling benchmark")
    parser.add_argument("--smoke", action="store_true", help="mark the results as a smoke run")
    parser.add_argument("--report-only", action="store_true", help="rewrite the reports from compare-results.json")
    return parser.parse_args(argv)


def is_smoke(args: argparse.Namespace) -> bool:
    """A run is a smoke run unless asked otherwise and it has 3+ repeats over scales spanning 100x."""
    spans = max(args.scales) / min(args.scales) >= 100
    return bool(args.smoke or args.repeats < 3 or not spans)


def sweep(
    setup: Setup,
    scale: float,
    work: Path,
    repeats: int,
    candidates: Sequence[int] = SWEEP_CANDIDATES,
    blocking: bool = False,
) -> dict[str, Any]:
    """Time every stage of the one-application pipeline at each candidate partition count (see oracle.py).

    ``blocking`` writes every stage's output (none handed over in memory), so that each stage's time is its
    own, as in a DAG whose pipelined edges are blocking.
    """
    shape = replace(VARIANTS[ORACLE], blocking=blocking)

    def time_stages(p: int, i: int) -> dict[str, float]:
        setup.oracle_partitions = dict.fromkeys(STAGES, p)
        run = run_variant(setup, shape, work / f"sweep-{p}-{i}")
        print(f"  sweep SF {scale_key(scale)} partitions={p}: {run.metrics['wall_s']:.1f} s", flush=True)
        return {stage: values["work_s"] for stage, values in run.metrics["stages"].items()}

    return sweep_entry(sweep_candidates(candidates, repeats, time_stages), repeats, blocking)


def run_one(
    setup: Setup, variant: Variant, scale: float, repeat: int, work: Path
) -> tuple[dict[str, Any], dict[str, Rows] | None]:
    record: dict[str, Any] = {"scale": scale_key(scale), "variant": variant.key, "repeat": repeat}
    try:
        result = run_variant(setup, variant, work / f"sf{scale_key(scale)}-{variant.key}-{repeat}")
    except Exception as exc:  # one variant failing must not lose the others' results
        record.update(ok=False, error=f"{type(exc).__name__}: {exc}")
        return record, None
    record.update(ok=True, **result.metrics)
    return record, result.answers


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.report_only:
        rerender(args.results, args.image)
        _quote_summary(args.results)
        return 0
    variants = select(args.variants)
    work = args.work or Path(tempfile.mkdtemp(prefix="finegrained-compare-"))
    work.mkdir(parents=True, exist_ok=True)
    command = command_line("compare", argv)
    airflow_home = work / "airflow-home"
    master = _local_master(airflow_home)
    if any(v.runner == "provider" for v in variants):
        prepare_airflow(airflow_home)
    try:
        return _run_all(args, variants, work, command, master, airflow_home)
    finally:
        stop_warm_pools(airflow_home)


def _run_all(
    args: argparse.Namespace, variants: list[Variant], work: Path, command: str, master: str, airflow_home: Path
) -> int:
    runs: list[dict[str, Any]] = []
    partitions_used: dict[str, Any] = {}
    sweeps = load_sweep(args.sweep_file)
    doc: dict[str, Any] = {}
    warm = [v for v in variants if v.warm]
    pool_start_s = None
    if warm:
        # Kept ready, as the warm mode means it: its start is measured apart, in no run's time.
        pool_start_s = start_pool(work, airflow_home, warm[0])
        print(f"warm pool started in {pool_start_s:.1f} s", flush=True)
    for scale in sorted(args.scales):
        key = scale_key(scale)
        setup = Setup(tables=tables_for(scale, args.data), work=work, master=master, airflow_home=airflow_home)
        if args.sweep_oracle:
            sweeps[key] = sweep(
                setup, scale, work, args.sweep_repeats, args.sweep_candidates, blocking=args.sweep_blocking
            )
            write_json(args.sweep_file, sweeps)
        setup.oracle_partitions, source = oracle.partitions_for(scale, args.sweep_file)
        partitions_used[key] = (setup.oracle_partitions, source)
        reference: dict[str, Rows] | None = None
        for repeat in range(1, args.repeats + 1):
            for variant in alternating(variants, repeat - 1):  # alternate to spread drift
                record, answers = run_one(setup, variant, scale, repeat, work)
                if answers is not None:
                    reference = reference or answers
                    diffs = compare_answers(reference, answers)
                    record["answers_identical"] = not any(diffs.values())
                    record["answer_differences"] = {q: d[:5] for q, d in diffs.items() if d}
                print(_line(record), flush=True)
                runs.append(record)
                # Written after every run, so a long run that stops early still leaves what it measured.
                doc = build_doc(args, command, master, variants, runs, partitions_used, pool_start_s)
                write_all(doc, args.results, args.image)
    if doc:
        print(f"wrote {args.results}/compare-* and {args.image}")
        _quote_summary(args.results)
    if not args.no_plan_scaling:
        subprocess.run([sys.executable, "-m", "bench", "plan-scaling"], check=True, cwd=REPO)
    bad = [r for r in runs if not r.get("ok") or not r.get("answers_identical")]
    return 1 if bad else 0


def summarize_runs(
    runs: list[dict[str, Any]], variant_keys: list[str], smallest: str
) -> tuple[dict[str, dict[str, Any]], dict[str, Any]]:
    """Per scale: each variant's medians with ratios, and the targets (``smallest``: the smallest scale's key)."""
    summary: dict[str, dict[str, Any]] = {}
    target_checks: dict[str, Any] = {}
    variant_keys = sorted(variant_keys, key=lambda k: list(VARIANTS).index(k) if k in VARIANTS else len(VARIANTS))
    for key in dict.fromkeys(r["scale"] for r in runs):
        scale_runs = [r for r in runs if r["scale"] == key]
        by_variant = {
            v: summarize([r for r in scale_runs if r["variant"] == v])
            for v in variant_keys
            if any(r["variant"] == v for r in scale_runs)
        }
        add_ratios(by_variant, BASELINE, ORACLE)
        summary[key] = by_variant
        target_checks[key] = {m: targets(by_variant, smallest=key == smallest, metric=m) for m in TIME_METRICS}
    return summary, target_checks


def build_doc(
    args: argparse.Namespace,
    command: str,
    master: str,
    variants: list[Variant],
    runs: list[dict[str, Any]],
    partitions_used: dict[str, Any],
    warm_pool_start_s: float | None = None,
) -> dict[str, Any]:
    """Everything the result files hold: machine, command, runs so far, medians, ratios and targets per scale."""
    summary, target_checks = summarize_runs(runs, [v.key for v in variants], scale_key(min(args.scales)))
    return {
        "smoke": is_smoke(args),
        "command": command,
        "machine": machine_info(),
        "master": master,
        "scales": [scale_key(s) for s in sorted(args.scales)],
        "repeats": args.repeats,
        "variants": {v.key: v.label for v in variants},
        "summary": summary,
        "targets": target_checks,
        "oracle_partitions": partitions_used,
        "runs": runs,
        "warm_pool_start_s": warm_pool_start_s,
    }


def rerender(results: Path, image: Path) -> None:
    """Recompute medians, ratios and targets from the runs in ``compare-results.json`` and write every file again."""
    doc = json.loads((results / "compare-results.json").read_text())
    doc["summary"], doc["targets"] = summarize_runs(doc["runs"], list(doc["variants"]), doc["scales"][0])
    write_all(doc, results, image)


def _quote_summary(results: Path) -> None:
    if results.resolve() == RESULTS.resolve():  # the committed results: quote them in the docs
        DOC.write_text(quote_in_doc(DOC.read_text(), (results / "compare-summary.md").read_text()))
        print(f"updated {DOC}")


def _local_master(airflow_home: Path) -> str:
    """The master the embedded default connection runs with (local[N] on this machine's usable cores)."""
    from airflow_provider_finegrained.settings import ConnectionSettings

    return str(ConnectionSettings.embedded_default(airflow_home=str(airflow_home)).master)


def _line(record: dict[str, Any]) -> str:
    if not record.get("ok"):
        return f"SF {record['scale']} ({record['variant']}) #{record['repeat']}: FAILED {record.get('error')}"
    return (
        f"SF {record['scale']} ({record['variant']}) #{record['repeat']}: {record['wall_s']:.1f} s, "
        f"{record['tasks']} tasks, {record['task_cpu_s']:.1f} task CPU s, "
        f"answers {'identical' if record.get('answers_identical') else 'DIFFER'}"
    )


if __name__ == "__main__":
    raise SystemExit(main())
