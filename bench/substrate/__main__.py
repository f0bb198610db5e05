"""Same substrate, side by side: Spark's defaults, the provider's sizing and a swept oracle in one warm pool.

Every policy runs the TPC-H pipeline's stage functions (``dags_examples/tpch_queries.py``) over the same
tpchgen-cli tables in a Spark Connect session of the same warm pool (the embedded default's: one
local[N] server, started once and timed apart); only the settings each stage runs with differ
(``policies.py``). Policies alternate their order per repeat. Per stage, Spark's own metrics (tasks,
task CPU, shuffle bytes, spill) come from the pool's REST API by job tag; the answers of Q1, Q3 and Q5
are compared with the defaults' run.

    python -m bench substrate --scales 0.01,0.1,1,10 --repeats 3

Writes bench/results/substrate.json and bench/results/substrate.md.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.compare.__main__ import tables_for
from bench.compare.answers import compare_answers, read_rows
from bench.compare.oracle import SWEEP_CANDIDATES, best_partitions, scale_key
from bench.compare.pipeline import ANSWERS, STAGES
from bench.substrate.policies import REPO, ProviderSizing, oracle_conf, uniform_conf
from bench.substrate.session_run import ConfFor, run_pipeline
from bench.substrate.spark_metrics import METRICS, stage_metrics

RESULTS = REPO / "bench" / "results"
POLICIES = ("defaults", "provider", "oracle")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench substrate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scales", default="0.01,0.1,1", help="comma-separated TPC-H scale factors")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--policies", default=",".join(POLICIES))
    parser.add_argument("--candidates", default=",".join(map(str, SWEEP_CANDIDATES)), help="the oracle's sweep")
    parser.add_argument("--sweep-repeats", type=int, default=1)
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "finegrained-bench-data")
    parser.add_argument("--out", type=Path, default=RESULTS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    scales = [float(s) for s in args.scales.split(",")]
    policies = [p for p in args.policies.split(",") if p]
    unknown = sorted(set(policies) - set(POLICIES))
    if unknown:
        raise SystemExit(f"unknown policies {unknown}; known: {', '.join(POLICIES)}")
    work = Path(tempfile.mkdtemp(prefix="substrate-"))
    settings, pool, pool_start_s = _start_pool(work)
    results: dict[str, Any] = {
        "command": "python -m bench substrate " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(), "load_average_1m": []},
        "pool_start_s": round(pool_start_s, 2),
        "scales": {},
    }
    try:
        from pyspark.sql import SparkSession

        from airflow_provider_finegrained.warm import client_url

        def session() -> Any:
            return SparkSession.builder.remote(client_url(pool.url, pool.token)).create()

        for scale in scales:
            tables = tables_for(scale, args.data)
            key = scale_key(scale)
            entry: dict[str, Any] = {"runs": {p: [] for p in policies}}
            if "oracle" in policies:
                candidates = [int(c) for c in args.candidates.split(",")]
                entry["sweep"] = _sweep(session, pool, tables, work / key, candidates, args.sweep_repeats)
                results["scales"][key] = entry
                _write(args.out, results)
            for repeat in range(args.repeats):
                order = policies[repeat % len(policies) :] + policies[: repeat % len(policies)]
                for policy in order:
                    results["machine"]["load_average_1m"].append(os.getloadavg()[0])
                    conf_for, options_for, decided = _policy(policy, settings, tables, work / key / policy, entry)
                    tag = f"{key}-{policy}-{repeat}"
                    run = _run(session, pool, tables, work / key / policy, conf_for, tag, options_for)
                    run["decided"] = decided
                    entry["runs"][policy].append(run)
                    print(f"SF {key} repeat {repeat} {policy}: {run['wall_s']:.1f} s", flush=True)
                    # Written after every run: a long scale (SF 10) stopped part-way keeps what it measured.
                    ran = [p for p in policies if entry["runs"][p]]
                    entry["answers_identical"] = _answers_agree(entry, ran)
                    entry["summary"] = {p: _summary(entry["runs"][p]) for p in ran}
                    results["scales"][key] = entry
                    _write(args.out, results)
    finally:
        from airflow_provider_finegrained import warm

        warm.stop(str(work / "pool"))
    return 0


def _start_pool(work: Path) -> tuple[Any, Any, float]:
    from airflow_provider_finegrained import warm
    from airflow_provider_finegrained.hooks.settings import ConnectionSettings

    home = work / "airflow-home"
    home.mkdir(parents=True)
    # Spark's status API forgets all but the last 1,000 stages; a run of every scale and the sweep has more,
    # and each run's metrics are read after it ends.
    retained = {"spark.ui.retainedStages": "1000000", "spark.ui.retainedJobs": "1000000"}
    settings = ConnectionSettings.embedded_default(
        airflow_home=str(home), defaults={"warm_pool": "auto", "spark_conf": retained}
    )
    started = time.perf_counter()
    pool = warm.ensure_started(settings, str(work / "pool"), idle_timeout_s=86400)
    return settings, pool, time.perf_counter() - started


def _policy(
    policy: str, settings: Any, tables: Path, out: Path, entry: dict[str, Any]
) -> tuple[ConfFor, ConfFor | None, dict[str, Any]]:
    """A policy's session settings and writer options per stage, and what it decided."""
    if policy == "defaults":
        return (lambda _stage: {}), None, {}
    if policy == "oracle":
        best = entry["sweep"]["best"]
        return (lambda stage: oracle_conf(best, stage)), None, {s: {"parallelism": best[s]} for s in STAGES}
    sizing = ProviderSizing(tables, out / "data", settings)
    return sizing.conf_for, sizing.write_options_for, sizing.decided  # filled in as the run decides each region


def _run(
    session: Callable[[], Any],
    pool: Any,
    tables: Path,
    out: Path,
    conf_for: ConfFor,
    tag: str,
    options_for: ConfFor | None = None,
) -> dict[str, Any]:
    spark = session()
    try:
        started = time.perf_counter()
        stages = run_pipeline(spark, tables, out / "data", conf_for, tag, options_for)
        wall = time.perf_counter() - started
    finally:
        spark.stop()
    measured = stage_metrics(pool.ui_url, pool.application_id, [s["tag"] for s in stages.values()])
    for values in stages.values():
        values.update(measured[values["tag"]])
    totals = {m: sum(s[m] for s in stages.values()) for m in METRICS}
    return {"wall_s": wall, "stages": stages, **totals, "out": str(out / "data")}


def _sweep(
    session: Callable[[], Any], pool: Any, tables: Path, work: Path, candidates: list[int], repeats: int
) -> dict[str, Any]:
    """Every stage at each candidate count (AQE off), per stage the fastest: the oracle's partitions."""
    times: dict[int, dict[str, list[float]]] = {}
    for p in candidates:
        for i in range(repeats):
            run = _run(session, pool, tables, work / f"sweep-{p}", functools.partial(_uniform, p), f"sweep-{p}-{i}")
            for stage, values in run["stages"].items():
                times.setdefault(p, {}).setdefault(stage, []).append(values["wall_s"])
            print(f"  sweep {p} partitions: {run['wall_s']:.1f} s", flush=True)
    return {"candidates": {str(p): t for p, t in times.items()}, "best": best_partitions(times)}


def _uniform(partitions: int, _stage: str) -> dict[str, str]:
    return uniform_conf(partitions)


def _answers_agree(entry: dict[str, Any], policies: list[str]) -> bool:
    """Every run's Q1, Q3 and Q5 equal the first run's (outputs of the last repeat of each policy)."""
    answers = {
        p: {q: read_rows(Path(entry["runs"][p][-1]["out"]) / stage) for q, (stage, _) in ANSWERS.items()}
        for p in policies
        if entry["runs"][p]
    }
    first = next(iter(answers.values()))
    return all(not any(compare_answers(first, other).values()) for other in answers.values())


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def med(values: list[float]) -> float:
        return statistics.median(values)

    out: dict[str, Any] = {"repeats": len(runs), "wall_s": med([r["wall_s"] for r in runs])}
    out["wall_range_s"] = [min(r["wall_s"] for r in runs), max(r["wall_s"] for r in runs)]
    out.update({m: med([r[m] for r in runs]) for m in METRICS})
    out["stages"] = {s: {k: med([r["stages"][s][k] for r in runs]) for k in ("wall_s", *METRICS)} for s in STAGES}
    return out


def _write(out: Path, results: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "substrate.json").write_text(json.dumps(results, indent=1, default=str))
    (out / "substrate.md").write_text(render(results))


def render(results: dict[str, Any]) -> str:
    """The summary table (medians per scale and policy) and the per-stage table."""
    mib = 2**20
    lines = [
        f"`{results['command']}`; pool start {results['pool_start_s']} s (not in any run).",
        "",
        "| scale | policy | repeats | wall (s, median) | range | vs defaults | vs oracle | tasks | task CPU (s) "
        "| shuffle written (MiB) | spilled (MiB) | answers identical |",
        "|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for key, entry in results["scales"].items():
        summary = entry.get("summary", {})  # none yet: only the oracle's sweep has run
        for policy, s in summary.items():
            base = summary.get("defaults", {}).get("wall_s")
            oracle = summary.get("oracle", {}).get("wall_s")
            lines.append(
                f"| {key} | {policy} | {s['repeats']} | {s['wall_s']:.1f} | {s['wall_range_s'][0]:.1f} - "
                f"{s['wall_range_s'][1]:.1f} | {_ratio(s['wall_s'], base)} | {_ratio(s['wall_s'], oracle)} | "
                f"{s['tasks']:.0f} | {s['cpu_time_s']:.1f} | {s['shuffle_write_bytes'] / mib:.1f} | "
                f"{(s['memory_spilled_bytes'] + s['disk_spilled_bytes']) / mib:.1f} | "
                f"{'yes' if entry['answers_identical'] else 'NO'} |"
            )
    lines += ["", "Per stage (medians): wall s / tasks / task CPU s / shuffle written MiB / spilled MiB", ""]
    policies = list(dict.fromkeys(p for entry in results["scales"].values() for p in entry.get("summary", {})))
    lines.append("| scale | stage | " + " | ".join(policies) + " |")
    lines.append("|---:|---|" + "---|" * len(policies))
    for key, entry in results["scales"].items():
        for stage in STAGES if entry.get("summary") else ():
            cells = []
            for policy in policies:
                if policy not in entry["summary"]:
                    cells.append("-")
                    continue
                v = entry["summary"][policy]["stages"][stage]
                spilled = (v["memory_spilled_bytes"] + v["disk_spilled_bytes"]) / mib
                cells.append(
                    f"{v['wall_s']:.2f} / {v['tasks']:.0f} / {v['cpu_time_s']:.2f} / "
                    f"{v['shuffle_write_bytes'] / mib:.1f} / {spilled:.1f}"
                )
            lines.append(f"| {key} | {stage} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _ratio(value: float, reference: float | None) -> str:
    return f"{value / reference:.2f}x" if reference else "-"


if __name__ == "__main__":
    sys.exit(main())
