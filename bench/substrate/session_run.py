"""One run of the pipeline's stage functions in a Spark Connect session of the warm pool.

Each stage starts from Spark's defaults (``SPARK_DEFAULTS``), takes its policy's settings, runs under a
job tag naming the run and the stage (so Spark's REST API attributes its jobs), writes its output as
parquet or, for a pipelined producer, hands it over in memory as a region does.
"""

from __future__ import annotations

import importlib
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.compare.pipeline import STAGES, fused_producers
from bench.compare.stage_app import stage_inputs
from bench.substrate.policies import REPO, SPARK_DEFAULTS

ConfFor = Callable[[str], dict[str, str]]


def run_pipeline(
    spark: Any, tables: Path, out: Path, conf_for: ConfFor, tag: str, options_for: ConfFor | None = None
) -> dict[str, dict[str, Any]]:
    """Run every stage in order; per stage its wall time, tag and the settings it ran with.

    ``options_for``: a stage's parquet writer options (the provider's row groups); none by default.
    """
    if str(REPO / "dags_examples") not in sys.path:
        sys.path.insert(0, str(REPO / "dags_examples"))
    queries = importlib.import_module("tpch_queries")
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    fused = fused_producers(list(STAGES))
    held: dict[str, Any] = {}
    stages: dict[str, dict[str, Any]] = {}
    for stage in STAGES:
        conf = {**SPARK_DEFAULTS, **conf_for(stage)}
        stage_tag = f"{tag}-{stage}"
        started = time.perf_counter()
        for key, value in conf.items():
            spark.conf.set(key, value)
        spark.addTag(stage_tag)
        try:
            result = queries.STAGES[stage](spark, **stage_inputs(spark, stage, tables, out, held))
            if stage in fused:
                held[stage] = result  # runs inside its consumer's query, as in a pipelined region
            else:
                options = options_for(stage) if options_for else {}
                result.write.mode("overwrite").options(**options).parquet(str(out / stage))
        finally:
            spark.removeTag(stage_tag)
        stages[stage] = {"wall_s": time.perf_counter() - started, "tag": stage_tag, "conf": conf_for(stage)}
    return stages
