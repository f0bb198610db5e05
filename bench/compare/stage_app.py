"""The PySpark application the spark-submit variants run: some stages of the TPC-H pipeline, in order.

``spark-submit stage_app.py SPEC_JSON`` where the spec names ``tables`` (tpchgen-cli parquet), ``out``
(one folder per stage output), ``stages`` to run, optional ``partitions`` (stage -> shuffle partitions,
set before the stage runs), ``timings`` (a JSON file written at the end) and optional ``fuse``. A stage
reads tables and the parquet its upstream stages wrote; a pipelined producer whose consumer runs in the
same application is not written but handed over as a DataFrame, as the provider does in a region, unless
``fuse`` is false. Each stage runs under a Spark job group named after it, so event logs attribute tasks
and CPU to stages.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[2]
for _path in (_REPO, _REPO / "dags_examples"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from bench.compare.pipeline import STAGE_INPUTS, fused_producers, parse_input  # noqa: E402


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the spec's stages in one SparkSession; returns what goes to the timings file."""
    from pyspark.sql import DataFrame, SparkSession

    tpch_queries = importlib.import_module("tpch_queries")  # from dags_examples: the DAG's own stage functions

    spark = SparkSession.builder.getOrCreate()
    sc = spark.sparkContext
    tables, out = Path(spec["tables"]), Path(spec["out"])
    partitions: dict[str, int] = spec.get("partitions") or {}
    # "fuse": false writes every stage's output, as a DAG with its pipelined edges made blocking does.
    fused = fused_producers(spec["stages"]) if spec.get("fuse", True) else set()
    held: dict[str, DataFrame] = {}
    stages: dict[str, dict[str, Any]] = {}
    for stage in spec["stages"]:
        if stage in partitions:
            spark.conf.set("spark.sql.shuffle.partitions", str(partitions[stage]))
        sc.setJobGroup(stage, stage)
        started, clock = datetime.now(UTC), time.perf_counter()
        result = tpch_queries.STAGES[stage](spark, **stage_inputs(spark, stage, tables, out, held))
        if stage in fused:
            held[stage] = result  # computed inside its consumer's query, as in a pipelined region
        else:
            result.write.mode("overwrite").parquet(str(out / stage))
        stages[stage] = {
            "started_at": started.isoformat(),
            "ended_at": datetime.now(UTC).isoformat(),
            "work_s": time.perf_counter() - clock,
        }
    info = {"application_id": sc.applicationId, "stages": stages}
    spark.stop()
    return info


def stage_inputs(spark: Any, stage: str, tables: Path, out: Path, held: dict[str, Any]) -> dict[str, Any]:
    """``stage``'s DataFrames: tables from ``tables``, an upstream handed over in ``held`` (taken out of it), else
    the parquet its upstream wrote under ``out``."""
    kwargs: dict[str, Any] = {}
    for param, ref in STAGE_INPUTS[stage].items():
        kind, name = parse_input(ref)
        if kind == "table":
            kwargs[param] = spark.read.parquet(str(tables / f"{name}.parquet"))
        elif name in held:
            kwargs[param] = held.pop(name)
        else:
            kwargs[param] = spark.read.parquet(str(out / name))
    return kwargs


def main(argv: list[str]) -> int:
    spec = json.loads(argv[1])
    info = run(spec)
    timings = spec.get("timings")
    if timings:
        tmp = f"{timings}.tmp"
        Path(tmp).write_text(json.dumps(info))
        os.replace(tmp, timings)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
