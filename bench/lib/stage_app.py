"""The PySpark application a plain spark-submit runs: some stages of the TPC-H pipeline, in order.

``spark-submit stage_app.py SPEC_JSON`` where the spec names ``tables`` (tpchgen-cli parquet), ``out``
(one folder per stage output), ``stages`` to run, optional ``partitions`` (stage -> shuffle partitions,
set before the stage runs), ``timings`` (a JSON file written at the end) and optional ``fuse``. A stage
reads tables and the parquet its upstream stages wrote; a pipelined producer whose consumer runs in the
same application is not written but handed over as a DataFrame, as the provider does in a region, unless
``fuse`` is false. Each stage runs under a Spark job group named after it, so event logs attribute tasks
and CPU to stages.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parents[2]
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))  # spark-submit runs this file as a script

from bench.lib.pipeline import fused_producers, run_stages  # noqa: E402


def run(spec: dict[str, Any]) -> dict[str, Any]:
    """Run the spec's stages in one SparkSession; returns what goes to the timings file."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.getOrCreate()
    sc = spark.sparkContext
    partitions: dict[str, int] = spec.get("partitions") or {}

    @contextlib.contextmanager
    def stage_settings(stage: str) -> Iterator[None]:
        if stage in partitions:
            spark.conf.set("spark.sql.shuffle.partitions", str(partitions[stage]))
        sc.setJobGroup(stage, stage)
        yield

    # "fuse": false writes every stage's output, as a DAG with its pipelined edges made blocking does.
    fused = fused_producers(spec["stages"]) if spec.get("fuse", True) else set()
    runs = run_stages(
        spark, spec["stages"], Path(spec["tables"]), Path(spec["out"]), fused=fused, around=stage_settings
    )
    stages = {s: {"started_at": r.started_at, "ended_at": r.ended_at, "work_s": r.seconds} for s, r in runs.items()}
    info = {"application_id": sc.applicationId, "stages": stages}
    spark.stop()
    return info


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
