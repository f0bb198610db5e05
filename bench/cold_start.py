"""Cold starts: the TPC-H example on a loopback standalone cluster, each part of the provider's JVM start alone
and together, side by side with the test suite's JVM options, alternating.

``python -m bench cold-start [--scale 0.01] [--rounds 2] [--variants none,archive,c1,...] [--workers 2] [--cores 1]``

Variants (each a connection and an environment, every other setting the same; history off, so that no run
learns from another):

- ``none``: as before issue 33: no class-data archive, tiered JIT, spark-submit's launcher as Spark starts it,
  no executor until the first job;
- ``first-executor``: ``none`` with the first executor asked for at the application's start;
- ``archive``: ``none`` with the provider's class-data archive;
- ``c1``: ``none`` with C1 alone on drivers and executors (and the launcher);
- ``provider``: the provider's defaults (all of the above, the JIT chosen per region);
- ``suite``: ``none`` with every JVM started as the test suite starts them (``tests/jvm_start.py``: the
  archive and C1 through ``JAVA_TOOL_OPTIONS``), the reference of issue 33's goal;
- ``jit-c1``, ``jit-tiered`` (not run by default): the provider's defaults with the JIT set, for the rule of
  ``planning/jit.py`` (``--variants jit-c1,jit-tiered --scale 1``).

Per run: wall time of ``airflow dags test``, the load average before it, each region's spark-submit seconds,
bytes read per task slot and JIT, and whether Q1, Q3 and Q5 equal the first run's. Results:
bench/results/cold_start.json and cold_start.md.
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.lib.airflow import airflow, airflow_env, migrate
from bench.lib.answers import compare_answers, read_rows
from bench.lib.pipeline import ANSWERS, EXAMPLES, REPO
from bench.lib.provider import LocalCluster, stage_report, start_cluster
from bench.lib.report import command_line, load_1m, machine_info, write_results
from bench.lib.stats import median

RESULTS = REPO / "bench" / "results"
PLAIN = {"class_archive": "off", "jit": "tiered", "executors_from": "first_job"}
NO_LAUNCHER_C1 = {"SPARK_LAUNCHER_OPTS": "-Xshare:auto"}


@dataclass(frozen=True)
class Variant:
    """A connection's settings and an environment over the common ones."""

    extra: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=dict)
    suite_options: bool = False


VARIANTS: dict[str, Variant] = {
    "none": Variant(PLAIN, NO_LAUNCHER_C1),
    "first-executor": Variant({**PLAIN, "executors_from": "one_at_start"}, NO_LAUNCHER_C1),
    "archive": Variant({**PLAIN, "class_archive": "auto"}, NO_LAUNCHER_C1),
    "c1": Variant({**PLAIN, "jit": "c1"}),
    "provider": Variant(),
    "suite": Variant(PLAIN, {}, suite_options=True),
    # The JIT alone, everything else the provider's: the measurements its rule comes from (planning/jit.py).
    "jit-c1": Variant({"jit": "c1"}),
    "jit-tiered": Variant({"jit": "tiered"}),
}
JIT_INPUTS = ("cold_start_jit_sf0.01", "cold_start_jit_sf1", "cold_start_jit_sf10", "cold_start_jit_sf10_round2")
"""The results files the JIT's rule was taken from (``--jit-table``)."""
DEFAULT_VARIANTS = ("none", "first-executor", "archive", "c1", "provider", "suite")


def suite_java_options() -> str:
    """The test suite's ``JAVA_TOOL_OPTIONS`` (its archive is the provider's)."""
    from tests.jvm_start import java_tool_options, make_archive

    return java_tool_options(make_archive())


def connection(cluster: LocalCluster, storage: Path, variant: Variant, cores: int) -> dict[str, Any]:
    conf = {"spark.pyspark.python": str(Path(airflow()).parent / "python")}
    if variant.suite_options:
        conf["spark.executorEnv.JAVA_TOOL_OPTIONS"] = suite_java_options()
    extra = {
        "master_webui_url": cluster.webui_url,
        "total_cores": cores,
        "total_memory": "4g",
        "executor_cores": 1,
        "executor_memory": "1g",
        "storage_root": str(storage),
        "learn_from_history": False,
        "spark_conf": conf,
        **variant.extra,
    }
    return {"conn_type": "finegrained_spark", "host": cluster.master_url, "extra": extra}


def run_once(name: str, home: Path, cluster: LocalCluster, data: Path, cores: int) -> dict[str, Any]:
    """One ``airflow dags test tpch_pipeline`` of variant ``name``: its seconds, load, regions and answers."""
    import subprocess

    variant = VARIANTS[name]
    storage = home / "storage" / f"{name}-{time.time_ns()}"
    env = airflow_env(home, {"AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT": json.dumps(
        connection(cluster, storage, variant, cores)), **variant.env})  # fmt: skip
    env.pop("JAVA_TOOL_OPTIONS", None)
    if variant.suite_options:
        env["JAVA_TOOL_OPTIONS"] = suite_java_options()
    load, started = load_1m(), time.monotonic()
    done = subprocess.run(
        [airflow(), "dags", "test", "tpch_pipeline", "--conf", json.dumps({"data_dir": str(data)})],
        env=env, capture_output=True, text=True, timeout=3600, check=False,
    )  # fmt: skip
    seconds = time.monotonic() - started
    (storage.parent / f"{storage.name}.log").write_text(done.stdout + done.stderr)
    ok = done.returncode == 0 and "state=success" in done.stdout + done.stderr
    report = stage_report("tpch_pipeline", env) if ok else {"stages": {}}
    return {"variant": name, "seconds": round(seconds, 1), "ok": ok, "load_1m": load,
            "java_tool_options": env.get("JAVA_TOOL_OPTIONS"), "regions": regions(report["stages"]),
            "answers": answers(report["stages"])}  # fmt: skip


def regions(stages: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Per region (by its leader): spark-submit seconds, bytes read per slot, JIT and archive, start latency."""
    out: dict[str, dict[str, Any]] = {}
    for stage, result in stages.items():
        trace = result.get("trace") or {}
        leader = trace.get("region_leader", stage)
        region = out.setdefault(leader, {"read_bytes": 0, "stages": []})
        region["stages"].append(stage)
        region["read_bytes"] += sum((trace.get("consumed_bytes") or {}).values())
        region["slots"] = trace.get("executors", 0) * trace.get("executor_cores", 0) or 1
        timings = trace.get("timings") or {}
        region["submit_s"] = timings.get("submit_s", region.get("submit_s"))
        region.setdefault("start_s", timings.get("start_s"))
        region["jvm"] = trace.get("jvm") or {}
    for region in out.values():
        region["read_per_slot"] = region["read_bytes"] // region["slots"]
    return out


def answers(stages: Mapping[str, Any]) -> dict[str, Any]:
    """Q1, Q3 and Q5 as the run wrote them."""
    return {query: read_rows(stages[stage]["output"]["path"]) for query, (stage, _) in ANSWERS.items()
            if stage in stages and (stages[stage].get("output") or {}).get("path")}  # fmt: skip


def order(variants: Sequence[str], rounds: int) -> list[str]:
    """Each round runs every variant, the order reversed every other round."""
    return [v for r in range(rounds) for v in (variants if r % 2 == 0 else list(reversed(variants)))]


def summary(runs: Sequence[Mapping[str, Any]], variants: Sequence[str]) -> dict[str, Any]:
    """Per variant: median seconds, ratio to ``suite``, runs failed, answers differing from the first run."""
    first: Mapping[str, Any] = next((r["answers"] for r in runs if r["ok"]), {})
    out: dict[str, Any] = {}
    for name in variants:
        mine = [r for r in runs if r["variant"] == name]
        seconds = median(r["seconds"] for r in mine if r["ok"])
        differing = sum(any(compare_answers(first, r["answers"]).values()) for r in mine if r["ok"])
        out[name] = {"median_s": seconds, "runs": [r["seconds"] for r in mine],
                     "failed": sum(not r["ok"] for r in mine), "answers_differ": differing}  # fmt: skip
    reference = out.get("suite", {}).get("median_s")
    for row in out.values():
        row["over_suite"] = round(row["median_s"] / reference, 2) if reference and row["median_s"] else None
    return out


def markdown(doc: Mapping[str, Any]) -> str:
    lines = [
        f"# Cold starts ({doc['command']})",
        "",
        f"Scale {doc['scale']}, {doc['cluster']}.",
        "",
        "| variant | median s | runs s | over suite | failed | answers differ |",
        "|---|---|---|---|---|---|",
    ]
    for name, row in doc["summary"].items():
        lines.append(f"| {name} | {row['median_s']} | {row['runs']} | {row['over_suite']} | {row['failed']} | "
                     f"{row['answers_differ']} |")  # fmt: skip
    lines += ["", "Per run and region (spark-submit s, read per slot, JIT):", ""]
    for run in doc["runs"]:
        parts = [f"{leader} {r['submit_s'] and round(r['submit_s'], 1)} s {r['read_per_slot']} B/slot "
                 f"{(r['jvm'] or {}).get('jit', '-')}" for leader, r in run["regions"].items()]  # fmt: skip
        lines.append(f"- {run['variant']} {run['seconds']} s (load {run['load_1m']}): " + "; ".join(parts))
    return "\n".join(lines) + "\n"


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench cold-start", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("--scale", default="0.01")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--variants", default=",".join(DEFAULT_VARIANTS), help=f"of {', '.join(VARIANTS)}")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--cores", type=int, default=1, help="cores per worker")
    parser.add_argument("--work", type=Path, default=REPO / ".cache" / "cold-start")
    parser.add_argument("--output", default="cold_start", help="results file name under bench/results/")
    parser.add_argument(
        "--jit-table",
        action="store_true",
        help="run nothing: the JIT's rule from the --jit-inputs results files (cold_start_jit.md)",
    )
    parser.add_argument(
        "--jit-inputs",
        default="cold_start_jit_sf0.01,cold_start_jit_sf1,cold_start_jit_sf10,cold_start_jit_sf10_round2",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.jit_table:
        from bench.cold_start_jit import table

        print(table(RESULTS, [name for name in args.jit_inputs.split(",") if name])["boundary"])
        return 0
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown or not variants:
        raise SystemExit(f"unknown variants {sorted(unknown)}; known: {', '.join(VARIANTS)}")
    import sys

    sys.path.insert(0, str(EXAMPLES))
    from tpch_data import generate

    data = args.work / f"tpch-sf{args.scale}"
    if not data.exists():
        generate(float(args.scale), data)
    home = args.work / "airflow"
    (home / "dags").mkdir(parents=True, exist_ok=True)
    for name in ("tpch_pipeline.py", "tpch_queries.py", "tpch_data.py"):
        (home / "dags" / name).write_text((EXAMPLES / name).read_text())
    migrate(airflow_env(home))
    cluster = start_cluster(args.work / "spark", args.workers, args.cores, "3g")
    runs: list[dict[str, Any]] = []
    try:
        for name in order(variants, args.rounds):
            runs.append(run_once(name, home, cluster, data, args.workers * args.cores))
            print(json.dumps({k: v for k, v in runs[-1].items() if k != "answers"}), flush=True)
            doc = {"command": command_line("cold-start", argv), "scale": args.scale, "machine": machine_info(),
                   "cluster": f"{args.workers} workers x {args.cores} core(s)", "summary": summary(runs, variants),
                   "runs": [{k: v for k, v in r.items() if k != "answers"} for r in runs]}  # fmt: skip
            write_results(RESULTS / f"{args.output}.json", doc, markdown(doc))  # after every run: a stop keeps them
    finally:
        cluster.stop()
    print(markdown(doc))
    return 0
