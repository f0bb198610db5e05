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
import contextlib
import os
import platform
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.lib.answers import answers_in, compare_answers
from bench.lib.pipeline import REPO, STAGES, fused_producers, run_stages, scale_key, tables_for
from bench.lib.report import command_line, write_results
from bench.lib.session import SPARK_DEFAULTS, apply_conf, remote_session
from bench.lib.spark_metrics import METRICS, stage_metrics
from bench.lib.stats import median
from bench.lib.sweep import SWEEP_CANDIDATES, best_partitions, in_turn, sweep
from bench.substrate.policies import POLICIES, ConfFor, policy_settings, uniform_conf

RESULTS = REPO / "bench" / "results"


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


@dataclass
class Substrate:
    """The one warm pool every policy runs in, the connection's settings it was started with, a scratch folder."""

    settings: Any
    pool: Any
    work: Path

    def session(self) -> Any:
        from airflow_provider_finegrained.warm import client_url

        return remote_session(client_url(self.pool.url, self.pool.token))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    scales = [float(s) for s in args.scales.split(",")]
    policies = [p for p in args.policies.split(",") if p]
    unknown = sorted(set(policies) - set(POLICIES))
    if unknown:
        raise SystemExit(f"unknown policies {unknown}; known: {', '.join(POLICIES)}")
    work = Path(tempfile.mkdtemp(prefix="substrate-"))
    substrate, pool_start_s = _start_pool(work)
    results: dict[str, Any] = {
        "command": command_line("substrate", argv),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version(), "load_average_1m": []},
        "pool_start_s": round(pool_start_s, 2),
        "scales": {},
    }
    try:
        for scale in scales:
            _run_scale(args, substrate, policies, scale, results)
    finally:
        from airflow_provider_finegrained import warm

        warm.stop(str(work / "pool"))
    return 0


def _run_scale(
    args: argparse.Namespace, substrate: Substrate, policies: list[str], scale: float, results: dict[str, Any]
) -> None:
    """Every policy ``--repeats`` times at ``scale`` (after the oracle's sweep), each taking every place in turn;
    the results written after every run, so that a long scale (SF 10) stopped part-way keeps what it measured."""
    tables = tables_for(scale, args.data)
    key = scale_key(scale)
    entry: dict[str, Any] = {"runs": {p: [] for p in policies}}
    results["scales"][key] = entry
    if "oracle" in policies:
        candidates = [int(c) for c in args.candidates.split(",")]
        entry["sweep"] = _sweep(substrate, tables, substrate.work / key, candidates, args.sweep_repeats)
        _write(args.out, results)
    for repeat in range(args.repeats):
        for name in in_turn(policies, repeat):
            results["machine"]["load_average_1m"].append(os.getloadavg()[0])
            out = substrate.work / key / name
            best = entry["sweep"]["best"] if name == "oracle" else None
            conf_for, options_for, decided = policy_settings(name, substrate.settings, tables, out, best)
            run = _run(substrate, tables, out, conf_for, f"{key}-{name}-{repeat}", options_for)
            run["decided"] = decided
            entry["runs"][name].append(run)
            print(f"SF {key} repeat {repeat} {name}: {run['wall_s']:.1f} s", flush=True)
            ran = [p for p in policies if entry["runs"][p]]
            entry["answers_identical"] = _answers_agree(entry, ran)
            entry["summary"] = {p: _summary(entry["runs"][p]) for p in ran}
            _write(args.out, results)


def _start_pool(work: Path) -> tuple[Substrate, float]:
    from airflow_provider_finegrained import warm
    from airflow_provider_finegrained.settings import ConnectionSettings

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
    return Substrate(settings, pool, work), time.perf_counter() - started


def run_pipeline(
    spark: Any, tables: Path, out: Path, conf_for: ConfFor, tag: str, options_for: ConfFor | None = None
) -> dict[str, dict[str, Any]]:
    """Every stage in order, each from Spark's defaults with its policy's settings, under a job tag naming the
    run and the stage (so Spark's REST API attributes its jobs); per stage its wall time, tag and settings.

    ``options_for``: a stage's parquet writer options (the provider's row groups); none by default."""
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)

    @contextlib.contextmanager
    def tagged(stage: str) -> Iterator[None]:
        apply_conf(spark, {**SPARK_DEFAULTS, **conf_for(stage)})
        spark.addTag(f"{tag}-{stage}")
        try:
            yield
        finally:
            spark.removeTag(f"{tag}-{stage}")

    fused = fused_producers(STAGES)
    runs = run_stages(spark, STAGES, tables, out, fused=fused, around=tagged, write_options=options_for)
    return {s: {"wall_s": r.seconds, "tag": f"{tag}-{s}", "conf": conf_for(s)} for s, r in runs.items()}


def _run(
    substrate: Substrate, tables: Path, out: Path, conf_for: ConfFor, tag: str, options_for: ConfFor | None = None
) -> dict[str, Any]:
    spark = substrate.session()
    try:
        started = time.perf_counter()
        stages = run_pipeline(spark, tables, out / "data", conf_for, tag, options_for)
        wall = time.perf_counter() - started
    finally:
        spark.stop()
    pool = substrate.pool
    measured = stage_metrics(pool.ui_url, pool.application_id, [s["tag"] for s in stages.values()])
    for values in stages.values():
        values.update(measured[values["tag"]])
    totals = {m: sum(s[m] for s in stages.values()) for m in METRICS}
    return {"wall_s": wall, "stages": stages, **totals, "out": str(out / "data")}


def _sweep(substrate: Substrate, tables: Path, work: Path, candidates: list[int], repeats: int) -> dict[str, Any]:
    """Every stage at each candidate count (AQE off), per stage the fastest: the oracle's partitions."""

    def time_stages(p: int, i: int) -> dict[str, float]:
        run = _run(substrate, tables, work / f"sweep-{p}", lambda _stage: uniform_conf(p), f"sweep-{p}-{i}")
        print(f"  sweep {p} partitions: {run['wall_s']:.1f} s", flush=True)
        return {stage: values["wall_s"] for stage, values in run["stages"].items()}

    times = sweep(candidates, repeats, time_stages)
    return {"candidates": {str(p): times[p] for p in sorted(times)}, "best": best_partitions(times)}


def _answers_agree(entry: dict[str, Any], policies: list[str]) -> bool:
    """Every run's Q1, Q3 and Q5 equal the first run's (outputs of the last repeat of each policy)."""
    answers = [answers_in(Path(entry["runs"][p][-1]["out"])) for p in policies if entry["runs"][p]]
    return all(not any(compare_answers(answers[0], other).values()) for other in answers)


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"repeats": len(runs), "wall_s": median(r["wall_s"] for r in runs)}
    out["wall_range_s"] = [min(r["wall_s"] for r in runs), max(r["wall_s"] for r in runs)]
    out.update({m: median(r[m] for r in runs) for m in METRICS})
    out["stages"] = {s: {k: median(r["stages"][s][k] for r in runs) for k in ("wall_s", *METRICS)} for s in STAGES}
    return out


def _write(out: Path, results: dict[str, Any]) -> None:
    write_results(out / "substrate.json", results, render(results), indent=1)


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
    raise SystemExit(main())
