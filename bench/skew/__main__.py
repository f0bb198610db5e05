"""Benchmark: a consumer stage over skewed input, with Spark's defaults, the provider's sizing, and its balance.

``python -m bench skew [options]``: write the data, run the variants, and write the results
(``bench/results/<name>.json`` and ``.md``); ``--rerender`` writes a results file's summary and Markdown again.
The package's docstring (:mod:`bench.skew`) describes the data, the variants and what is measured.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.lib.report import command_line, write_results
from bench.lib.session import local_session
from bench.skew.data import FILES, KEYS, ZIPF_S, data_stats, hot_key_share, write_dim, write_upstreams
from bench.skew.report import render, summarize
from bench.skew.run import run_variants, session_conf
from bench.skew.settings import ALL_VARIANTS, AVG_BYTES_PER_TASK, VARIANTS, producer_options

RESULTS = Path(__file__).resolve().parents[1] / "results"


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="python -m bench skew", description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--zipf", type=float, default=ZIPF_S, help="the keys' Zipf exponent (> 1)")
    parser.add_argument("--name", default="skew", help="results file name in bench/results (without suffix)")
    parser.add_argument("--rerender", type=Path, help="rewrite the summary and markdown of a results JSON")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {ALL_VARIANTS}")
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(ALL_VARIANTS))
    if unknown or not variants:
        parser.error(f"--variants: unknown {unknown or 'none given'}; known: {', '.join(ALL_VARIANTS)}")
    return args, variants


def main(argv: list[str] | None = None) -> int:
    args, variants = parse_args(argv)
    if args.rerender:
        rerender(args.rerender)
        return 0
    started = time.time()
    data, runs = measure(args, variants)
    result = {"meta": meta(args, argv, started), "data": data, "summary": summarize(runs), "runs": runs}
    write_results(RESULTS / f"{args.name}.json", result, render(result))
    print(render(result))
    return 0


def rerender(path: Path) -> None:
    """A results file's summary and Markdown again, from its runs."""
    result = json.loads(path.read_text())
    result["summary"] = summarize(result["runs"])
    write_results(path, result, render(result))


def measure(args: argparse.Namespace, variants: list[str]) -> tuple[dict[str, Any], list[Any]]:
    """The data's file sizes, and every run of the variants, in a temp dir deleted after."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    with tempfile.TemporaryDirectory(prefix="skew-bench-") as tmpdir:
        tmp = Path(tmpdir)
        spark = local_session("skew_bench", session_conf(tmp))
        spark.sparkContext.setLogLevel("ERROR")
        upstream = write_upstreams(spark, tmp, args, variants)
        write_dim(spark, tmp / "dim")
        data = {name: data_stats(path) for name, path in upstream.items()}
        runs = run_variants(spark, tmp, upstream, variants, args.reps)
        spark.stop()
    return data, runs


def meta(args: argparse.Namespace, argv: Sequence[str] | None, started: float) -> dict[str, Any]:
    """What the results record of the run: when, the command, the machine, the data's shape and the settings."""
    return {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": command_line("skew", argv),
        "machine": f"{os.cpu_count()} cores, {platform.platform()}",
        "rows": args.rows,
        "reps": args.reps,
        "zipf_s": args.zipf,
        "keys": KEYS,
        "hot_key_share": round(hot_key_share(args.zipf), 3),
        "files": FILES,
        "avg_bytes_per_task": AVG_BYTES_PER_TASK,
        "producer_write_options": producer_options(),
        "wall_s": round(time.time() - started, 1),
    }


if __name__ == "__main__":
    raise SystemExit(main())
