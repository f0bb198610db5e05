"""Each shuffling stage alone at each candidate shuffle partition count, many times, in one warm SparkSession.

``python -m bench stage-sweep --upstream DIR [--scale 1] [--stages ...] [--candidates 1 2 4 8]
[--repeats 9] [--out bench/results/stage-sweep-sf1.json]``

The whole-pipeline sweep (``python -m bench compare --sweep-oracle --sweep-blocking``) times every stage inside a
40 s application per sample, so five samples per count take 20 minutes and still overlap (at SF 1 a stage's
repetitions spread by 20% or more). This one isolates the stages the history benchmark judges: every
candidate reads the same inputs (the tables, and the stage outputs of one earlier blocking sweep run in
``--upstream``), runs one stage under ``spark.sql.shuffle.partitions`` = P with AQE off (as the sweep),
writes its output to scratch and is timed from the query's start to its written output. Rounds go over
every (stage, candidate) in turn, every other round in reverse, so that drift falls on all alike; a first
round warms the JVM and is not kept.

The result has the sweep file's shape (``{scale: {candidates: {P: {stage: [s, ...]}}, best, ...}}``), so
``python -m bench history --report-only --sweep-file`` judges the decisions against it.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.compare.runners import DRIVER_MEMORY
from bench.lib.pipeline import REPO, run_stages, scale_key
from bench.lib.report import command_line, machine_info, write_json
from bench.lib.session import local_session
from bench.lib.sweep import rounds as alternating_rounds
from bench.lib.sweep import sweep_entry

SHUFFLING = ("q1_pricing_summary", "q3_join", "q3_shipping_priority", "q5_join", "q5_local_supplier_volume")
"""The stages that shuffle at SF 1 in the history benchmark, and q3_join's forward consumer (one count for both)."""


def rounds(stages: Sequence[str], candidates: Sequence[int], repeats: int) -> list[list[tuple[str, int]]]:
    """The (stage, candidate) order of each round: round 0 is the warm-up; odd rounds go forward, even back."""
    return alternating_rounds([(s, p) for s in stages for p in candidates], repeats, warmup=True)


def sweep_doc(scale: float, times: dict[int, dict[str, list[float]]], repeats: int, command: str) -> dict[str, Any]:
    """The sweep file's entry for ``scale``: every sample, the fastest median per stage, how it was made."""
    return {
        scale_key(scale): sweep_entry(times, repeats, blocking=True) | {"command": command, "machine": machine_info()}
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench stage-sweep", description=__doc__.splitlines()[0])
    parser.add_argument("--upstream", type=Path, required=True, help="a blocking sweep run's out/ folder")
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "finegrained-bench-data")
    parser.add_argument("--stages", nargs="+", default=list(SHUFFLING))
    parser.add_argument("--candidates", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "stage-sweep-sf1.json")
    args = parser.parse_args(argv)
    tables = args.data / f"tpch-sf{scale_key(args.scale)}"
    if not tables.is_dir():
        parser.error(f"no TPC-H tables at {tables}: run the sweep (python -m bench compare) at this scale first")
    missing = [s for s in args.stages if not (args.upstream / s).is_dir()]
    if missing:
        parser.error(f"--upstream {args.upstream} lacks the outputs {', '.join(missing)}: give a blocking sweep's")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    command = command_line("stage-sweep", argv)
    tables = args.data / f"tpch-sf{scale_key(args.scale)}"
    conf = {"spark.driver.memory": DRIVER_MEMORY, "spark.sql.adaptive.enabled": "false"}
    spark = local_session("stage_sweep", conf)
    scratch = Path(tempfile.mkdtemp(prefix="finegrained-stage-sweep-"))
    times: dict[int, dict[str, list[float]]] = {}
    try:
        for i, order in enumerate(rounds(args.stages, args.candidates, args.repeats)):
            for stage, p in order:
                spark.conf.set("spark.sql.shuffle.partitions", str(p))
                run = run_stages(spark, [stage], tables, scratch, upstream=args.upstream)
                if i:  # round 0 warms the JVM
                    times.setdefault(p, {}).setdefault(stage, []).append(run[stage].seconds)
            print(f"round {i}{' (warm-up)' if not i else ''} done", flush=True)
            if i:
                write_json(args.out, sweep_doc(args.scale, times, i, command))
    finally:
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
