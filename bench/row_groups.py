"""What a producer's parquet row groups and a scan's split size cost, on TPC-H ``lineitem``, one at a time.

At SF 10 the provider's ``lineitem_projected`` and Q1 spent more task CPU than Spark's defaults
(``bench/results/substrate-sf10/``). The provider changes two things there: the scan split of
``lineitem`` (the balance's 110 MiB against Spark's 128 MiB: 22 scan tasks against 19) and the row groups
``lineitem_projected`` writes for its consumers (a quarter of ``avg_bytes_per_task``, 16 MiB at the
default 64 MiB, against parquet's 128 MiB), which Q1 then reads. This runs the two stages with each
setting apart, in one ``local[2]`` session, the variants in alternating order, Spark's other defaults as
the substrate sets them (AQE on, 200 shuffle partitions):

- ``lineitem_projected`` with split S and row groups R, its task CPU from Spark's REST API;
- Q1 over that output at Spark's default split: its task CPU isolates reading R-sized row groups.

    .venv/bin/python -m bench.row_groups --scale 10 --repeats 3

Writes ``bench/results/row-groups.json`` and ``.md``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from bench.compare.__main__ import tables_for
from bench.substrate.policies import REPO, SPARK_DEFAULTS
from bench.substrate.spark_metrics import stage_metrics

MiB = 2**20
RESULTS = REPO / "bench" / "results"
SPARK_SPLIT = 128 * MiB
PARQUET_ROW_GROUP = 128 * MiB
PROVIDER_SPLIT = 115_762_413
"""The split the provider decided for ``lineitem`` at SF 10 (bench/results/substrate-sf10)."""
PROVIDER_ROW_GROUP = 16 * MiB
"""What the provider's producers write for consumers of the default 64 MiB per task."""
VARIANTS: dict[str, tuple[int, int]] = {
    "spark-defaults": (SPARK_SPLIT, PARQUET_ROW_GROUP),
    "provider-split": (PROVIDER_SPLIT, PARQUET_ROW_GROUP),
    "provider-row-groups": (SPARK_SPLIT, PROVIDER_ROW_GROUP),
    "provider-both": (PROVIDER_SPLIT, PROVIDER_ROW_GROUP),
}
"""Name: (``maxPartitionBytes`` of the ``lineitem`` scan, ``parquet.block.size`` of its output)."""
MEASURED = ("wall_s", "tasks", "cpu_time_s")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.row_groups", description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=10.0, help="TPC-H scale factor")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "finegrained-bench-data")
    parser.add_argument("--out", type=Path, default=RESULTS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if str(REPO / "dags_examples") not in sys.path:
        sys.path.insert(0, str(REPO / "dags_examples"))
    queries = importlib.import_module("tpch_queries")
    tables = tables_for(args.scale, args.data)
    from pyspark.sql import SparkSession

    work = Path(tempfile.mkdtemp(prefix="row-groups-"))
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench-row-groups")
        .config("spark.driver.memory", "2g")
        .config("spark.local.dir", str(work / "spark-local"))
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.ui.retainedJobs", "100000")
        .config("spark.ui.retainedStages", "100000")
        .getOrCreate()
    )
    runs: list[dict[str, Any]] = []
    order = list(VARIANTS)
    try:
        for repeat in range(-1, args.repeats):  # repeat -1 (one variant) warms the JVM and is not counted
            for name in order if repeat >= 0 else order[:1]:
                split, row_group = VARIANTS[name]
                out = work / name
                tag = f"{name}-{repeat}"
                run: dict[str, Any] = {"variant": name, "repeat": repeat, "load_1m": os.getloadavg()[0]}
                for key, value in {**SPARK_DEFAULTS, "spark.sql.files.maxPartitionBytes": str(split)}.items():
                    spark.conf.set(key, value)
                lineitem = spark.read.parquet(str(tables / "lineitem.parquet"))
                run["write"] = _timed(spark, f"{tag}-write", partial(_write, queries, spark, lineitem, row_group, out))
                spark.conf.set("spark.sql.files.maxPartitionBytes", str(SPARK_SPLIT))
                run["read"] = _timed(spark, f"{tag}-read", partial(_q1, queries, spark, out))
                print(f"{tag}: write {run['write']}, read {run['read']}", flush=True)
                if repeat >= 0:
                    runs.append(run)
            order = order[1:] + order[:1]
    finally:
        spark.stop()
    result = {
        "command": "python -m bench.row_groups " + " ".join(argv if argv is not None else sys.argv[1:]),
        "machine": {"cores": os.cpu_count(), "python": platform.python_version()},
        "variants": {k: {"split_bytes": s, "row_group_bytes": r} for k, (s, r) in VARIANTS.items()},
        "runs": runs,
        "summary": summarize(runs),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "row-groups.json").write_text(json.dumps(result, indent=1))
    (args.out / "row-groups.md").write_text(render(result))
    print(render(result))
    return 0


def _write(queries: Any, spark: Any, lineitem: Any, row_group: int, out: Path) -> None:
    projected = queries.lineitem_projected(spark, lineitem)
    projected.write.mode("overwrite").option("parquet.block.size", str(row_group)).parquet(
        str(out / "lineitem_projected")
    )


def _q1(queries: Any, spark: Any, out: Path) -> None:
    projected = spark.read.parquet(str(out / "lineitem_projected"))
    queries.q1_pricing_summary(spark, projected).write.mode("overwrite").parquet(str(out / "q1"))


def _timed(spark: Any, group: str, action: Callable[[], None]) -> dict[str, float]:
    sc = spark.sparkContext
    sc.setJobGroup(group, group)
    started = time.perf_counter()
    action()
    wall = time.perf_counter() - started
    metrics = stage_metrics(sc.uiWebUrl, sc.applicationId, [group], job_group=True)[group]
    return {"wall_s": round(wall, 2), "tasks": metrics["tasks"], "cpu_time_s": round(metrics["cpu_time_s"], 2)}


def summarize(runs: list[dict[str, Any]]) -> dict[str, dict[str, dict[str, float]]]:
    """Per variant and side (write, read): the median of each measure over the repeats."""
    out: dict[str, dict[str, dict[str, float]]] = {}
    for name in [v for v in VARIANTS if any(r["variant"] == v for r in runs)]:
        mine = [r for r in runs if r["variant"] == name]
        out[name] = {
            side: {m: round(statistics.median(r[side][m] for r in mine), 2) for m in MEASURED}
            for side in ("write", "read")
        }
    return out


def render(result: dict[str, Any]) -> str:
    """The medians, each variant against Spark's defaults."""
    s = result["summary"]
    base = s.get("spark-defaults")
    lines = [
        f"`{result['command']}`; medians of {len({r['repeat'] for r in result['runs']})}, alternating order.",
        "",
        "| variant | split (MiB) | row groups (MiB) | write s | write tasks | write CPU s | read (Q1) s "
        "| read tasks | read CPU s | CPU vs defaults (write / read) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for name, v in s.items():
        setting = result["variants"][name]
        ratios = (
            " / ".join(f"{v[side]['cpu_time_s'] / base[side]['cpu_time_s']:.2f}x" for side in ("write", "read"))
            if base
            else "-"
        )
        lines.append(
            f"| {name} | {setting['split_bytes'] / MiB:.1f} | {setting['row_group_bytes'] / MiB:.0f} | "
            f"{v['write']['wall_s']} | {v['write']['tasks']:.0f} | {v['write']['cpu_time_s']} | "
            f"{v['read']['wall_s']} | {v['read']['tasks']:.0f} | {v['read']['cpu_time_s']} | {ratios} |"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
