"""Benchmark: an in-memory handover run lazily inside its consumer's jobs, or materialised at its producer.

A pipelined producer whose output only its in-region consumer reads hands over a lazy DataFrame: its plan
runs inside the consumer's Spark jobs, under the consumer's session settings. The alternative is to
materialise the handover under the producer's own settings before the consumer starts (``persist`` +
``count``, or ``localCheckpoint``), which applies the producer's own shuffle partitions and split size to its
work at the price of an extra job and of holding the result in memory.

This script measures the three on the TPC-H pipeline's two pipelined pairs (``q3_join -> q3_shipping_priority``
and ``q5_join -> q5_local_supplier_volume``, both forward edges) in ONE ``local[2]`` SparkSession. Their
upstream outputs are written first, as the blocking stages would commit them; each pair is then sized by the
provider's own ``decide_region`` from those files' bytes, and run with the session settings the provider
would set (``StageSizing.session_conf`` and ``adaptive_conf``), AQE off and on. Recorded per run: wall time
of the pair (the consumer writes parquet), the Spark tasks of each Spark stage that ran under the producer's
and the consumer's job groups (Spark's status API), and the bytes the materialised handover held (the status
API's storage view), and Spark's CPU and task time for the pair (steadier than wall time on a shared
machine). Repeats are interleaved; the medians are reported.

Usage::

    .venv/bin/python bench/handover.py --data DIR [--scale 1] [--repeats 3]

``DIR`` holds tpchgen-cli tables (generated there at ``--scale`` if missing). Results go to
``bench/results/handover.json``. The upstream outputs and the pairs' outputs go to a temporary folder,
removed at the end.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "dags_examples"))

from airflow_provider_finegrained.contract import OutputRecord  # noqa: E402
from airflow_provider_finegrained.execution.decision import (  # noqa: E402
    ExternalSizes,
    StageInputs,
    adaptive_conf,
    decide_region,
)
from airflow_provider_finegrained.planning import ClusterProfile, ParallelismConfig, StageSpec, plan_stages  # noqa: E402
from airflow_provider_finegrained.runtime import spark_status  # noqa: E402

MODES = ("lazy", "persist", "checkpoint")
CONFIG = ParallelismConfig(avg_bytes_per_task="64m", max_parallelism=128)
DRIVER_MEMORY = "4g"
PROFILE = ClusterProfile(total_cores=2, total_memory="8g", executor_memory=DRIVER_MEMORY, local=True)
PAIRS = {
    "q3": ("q3_join", "q3_shipping_priority"),
    "q5": ("q5_join", "q5_local_supplier_volume"),
}
UPSTREAM = ("lineitem_projected", "customer_orders", "nation_region")


def files_of(path: Path) -> list[int]:
    return sorted(p.stat().st_size for p in path.rglob("*.parquet"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results" / "handover.json")
    args = parser.parse_args()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")

    import tpch_queries as q
    from pyspark.sql import SparkSession
    from tpch_data import generate

    tables = generate(args.scale, args.data)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench-handover")
        .config("spark.driver.memory", DRIVER_MEMORY)
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    work = Path(tempfile.mkdtemp(prefix="bench-handover-"))
    read = {name: spark.read.parquet(str(path)) for name, path in tables.items()}

    # The blocking upstream stages, committed as parquet (what the pairs read).
    upstream: dict[str, Path] = {}
    for name in UPSTREAM:
        fn = q.STAGES[name]
        kwargs = {"lineitem": read["lineitem"]} if name == "lineitem_projected" else {}
        if name == "customer_orders":
            kwargs = {"customer": read["customer"], "orders": read["orders"]}
        if name == "nation_region":
            kwargs = {"nation": read["nation"], "region": read["region"]}
        upstream[name] = work / name
        fn(spark, **kwargs).write.parquet(str(upstream[name]))
    committed = {name: spark.read.parquet(str(path)) for name, path in upstream.items()}

    def record(name: str) -> OutputRecord:
        sizes = files_of(upstream[name])
        return OutputRecord(name, str(upstream[name]), "parquet", sizes, 0, len(sizes))

    def external(name: str) -> ExternalSizes:
        return ExternalSizes(str(tables[name]), "parquet", files_of(tables[name]))

    plan = plan_stages(
        [
            *(StageSpec.build(name) for name in UPSTREAM),
            StageSpec.build("q3_join", {"customer_orders": "customer_orders", "lineitem": "lineitem_projected"}),
            StageSpec.build(
                "q3_shipping_priority",
                {"joined": {"upstream": "q3_join", "mode": "pipelined", "distribution": "forward"}},
            ),
            StageSpec.build(
                "q5_join",
                {
                    "lineitem": "lineitem_projected",
                    "nation_region": {"upstream": "nation_region", "distribution": "broadcast"},
                },
            ),
            StageSpec.build(
                "q5_local_supplier_volume",
                {"joined": {"upstream": "q5_join", "mode": "pipelined", "distribution": "forward"}},
            ),
        ]
    )
    inputs = {
        "q3_join": StageInputs(
            upstream={"customer_orders": record("customer_orders"), "lineitem": record("lineitem_projected")}
        ),
        "q5_join": StageInputs(
            upstream={"lineitem": record("lineitem_projected"), "nation_region": record("nation_region")},
            external={t: external(t) for t in ("orders", "customer", "supplier")},
        ),
    }
    producers: dict[str, Callable[[], Any]] = {
        "q3_join": lambda: q.q3_join(
            spark, customer_orders=committed["customer_orders"], lineitem=committed["lineitem_projected"]
        ),
        "q5_join": lambda: q.q5_join(
            spark,
            lineitem=committed["lineitem_projected"],
            orders=read["orders"],
            customer=read["customer"],
            supplier=read["supplier"],
            nation_region=committed["nation_region"],
        ),
    }
    decided: dict[str, Any] = {}
    for pair, (producer, consumer) in PAIRS.items():
        decision = decide_region(plan, plan.stages[producer].region, inputs, lambda _: CONFIG, PROFILE)
        decided[pair] = {
            stage: {
                "parallelism": decision.sizing.stages[stage].parallelism,
                "session_conf": decision.sizing.stages[stage].session_conf(),
                "runs_in": decision.traces[stage].runs_in,
            }
            for stage in (producer, consumer)
        }

    runs: list[dict[str, Any]] = []
    counter = 0
    for repeat in range(args.repeats):
        for aqe in (False, True):
            order = MODES if repeat % 2 == 0 else tuple(reversed(MODES))
            for mode in order:
                for pair, (producer, consumer) in PAIRS.items():
                    counter += 1
                    run = _run_pair(
                        spark, work, counter, mode, aqe, decided[pair], producer, consumer, producers[producer], q
                    )
                    run.update(pair=pair, aqe=aqe, mode=mode, repeat=repeat)
                    runs.append(run)
                    print(json.dumps(run), flush=True)
    spark.stop()
    shutil.rmtree(work, ignore_errors=True)

    summary: dict[str, Any] = {}
    for pair in PAIRS:
        for aqe in (False, True):
            for mode in MODES:
                mine = [r for r in runs if r["pair"] == pair and r["aqe"] == aqe and r["mode"] == mode]
                summary[f"{pair} aqe={'on' if aqe else 'off'} {mode}"] = {
                    "median_s": round(statistics.median(r["wall_s"] for r in mine), 2),
                    "median_cpu_s": round(statistics.median(r["cpu_s"] for r in mine), 2),
                    "median_task_run_s": round(statistics.median(r["task_run_s"] for r in mine), 2),
                    "runs_s": [r["wall_s"] for r in mine],
                    "producer_tasks": mine[-1]["producer_tasks"],
                    "consumer_tasks": mine[-1]["consumer_tasks"],
                    "materialised_bytes": mine[-1]["materialised_bytes"],
                    "rows": mine[-1]["rows"],
                }
    result = {
        "command": (
            f".venv/bin/python bench/handover.py --data {args.data} --scale {args.scale:g} --repeats {args.repeats}"
        ),
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "shared": True},
        "scale": args.scale,
        "master": "local[2]",
        "driver_memory": DRIVER_MEMORY,
        "decided": decided,
        "summary": summary,
        "runs": runs,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


def _run_pair(
    spark: Any,
    work: Path,
    counter: int,
    mode: str,
    aqe: bool,
    decided: dict[str, Any],
    producer: str,
    consumer: str,
    make: Callable[[], Any],
    q: Any,
) -> dict[str, Any]:
    """One pair as the region loop runs it: the producer's settings, its function, then the consumer's."""
    sc = spark.sparkContext
    groups = (f"{counter}-{producer}", f"{counter}-{consumer}")
    started = time.perf_counter()
    sc.setJobGroup(groups[0], producer)
    for key, value in {**decided[producer]["session_conf"], **adaptive_conf(aqe, CONFIG)}.items():
        spark.conf.set(key, value)
    df = make()
    materialised = 0
    if mode == "persist":
        df = df.persist()
        df.count()
        materialised = _cached_bytes(spark)
    elif mode == "checkpoint":
        df = df.localCheckpoint(eager=True)
        materialised = _cached_bytes(spark)
    sc.setJobGroup(groups[1], consumer)
    for key, value in {**decided[consumer]["session_conf"], **adaptive_conf(aqe, CONFIG)}.items():
        spark.conf.set(key, value)
    out = q.STAGES[consumer](spark, joined=df)
    target = work / f"out-{counter}"
    out.write.parquet(str(target))
    wall = time.perf_counter() - started
    rows = spark.read.parquet(str(target)).count()
    reports = [spark_status.collect(spark, g) for g in groups]
    if mode == "persist":
        df.unpersist(blocking=True)
    for rdd in list(sc._jsc.getPersistentRDDs().values()):  # a checkpointed handover's blocks
        rdd.unpersist(True)
    return {
        "wall_s": round(wall, 3),
        "producer_tasks": _tasks(reports[0]),
        "consumer_tasks": _tasks(reports[1]),
        "materialised_bytes": materialised,
        "rows": rows,
        # Spark's own CPU and task time for the pair: steadier than wall time on a shared machine.
        "cpu_s": round(sum(r.cpu_time_s for r in reports if r), 3),
        "task_run_s": round(sum(s.run_time_s for r in reports if r for s in r.spark_stages), 3),
    }


def _tasks(report: spark_status.StageTaskReport | None) -> list[int]:
    return [] if report is None else [s.tasks for s in report.spark_stages if s.status != "SKIPPED"]


def _cached_bytes(spark: Any) -> int:
    sc = spark.sparkContext
    base = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}/storage/rdd"
    deadline = time.monotonic() + 5
    while True:  # the status store is filled by the listener bus, shortly after the job
        rdds = spark_status.get_status_json(base)
        held = sum(int(r.get("memoryUsed", 0)) + int(r.get("diskUsed", 0)) for r in rdds)
        if held or time.monotonic() > deadline:
            return held
        time.sleep(0.2)


if __name__ == "__main__":
    main()
