"""The provider's own overhead per stage against the Spark work, and one region against many apps.

Runs, side by side in one process and one Airflow (SQLite, ``dag.test()``), a chain of four small
stages (a source, two transformations, an aggregate) twice per repeat: with pipelined exchanges (one
region, one Spark application, data handed over in memory) and with blocking exchanges (four regions,
four applications, outputs committed in between). For every stage it reads the decision trace's
timings: ``inputs_s`` (XCom reads, commit checks, measuring), ``decide_s`` (planning and sizing),
``submit_s`` (the region's spark-submit, JVM start included) and ``spark_stage_s`` (the stage's own work
in the driver).

Run: ``python -m bench overhead [--repeats 3]``; results go to bench/results/overhead.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results"

DAG = """
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.dags.declaration import Input
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

def source(spark):
    return spark.range(200_000).selectExpr("id", "id % 97 AS k", "rand(7) AS x")

def scale(spark, rows):
    return rows.selectExpr("id", "k", "x * 2 AS x")

def keep(spark, rows):
    return rows.where("x > 0.5")

def aggregate(spark, rows):
    return rows.groupBy("k").agg({{"x": "sum"}})

with DAG("{dag_id}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    a = Stage(task_id="source", python_callable=source)
    b = Stage(task_id="scale", python_callable=scale, inputs={{"rows": Input(a, mode="{mode}")}})
    c = Stage(task_id="keep", python_callable=keep, inputs={{"rows": Input(b, mode="{mode}")}})
    Stage(task_id="aggregate", python_callable=aggregate, inputs={{"rows": Input(c, mode="{mode}")}})
"""
VARIANTS = {"one_region": "pipelined", "separate_apps": "blocking"}


def setup(home: Path) -> Path:
    dags = home / "dags"
    dags.mkdir(parents=True)
    os.environ.update(
        {
            "AIRFLOW_HOME": str(home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
    )
    for variant, mode in VARIANTS.items():
        (dags / f"{variant}.py").write_text(DAG.format(dag_id=f"overhead_{variant}", mode=mode))
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "db", "migrate"], check=True, capture_output=True)
    return dags


def run_variant(dags: Path, variant: str) -> dict[str, Any]:
    from airflow.dag_processing.dagbag import DagBag

    from airflow_provider_finegrained.cli.report import stage_results

    dag_id = f"overhead_{variant}"
    dag = DagBag(dag_folder=str(dags / f"{variant}.py"), safe_mode=False).dags[dag_id]
    start = time.perf_counter()
    run = dag.test()
    wall = time.perf_counter() - start
    if run.state != "success":
        raise RuntimeError(f"{dag_id} ended {run.state}")
    _, results = stage_results(dag_id, run.run_id)
    stages = {name: r["trace"]["timings"] for name, r in results.items()}
    return {
        "wall_s": wall,
        "stages": stages,
        "applications": len({r["trace"]["application_id"] for r in results.values()}),
    }


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    per_stage: dict[str, dict[str, float]] = {}
    for name in runs[0]["stages"]:
        per_stage[name] = {
            key: statistics.median(r["stages"][name].get(key, 0.0) for r in runs)
            for key in ("inputs_s", "decide_s", "submit_s", "spark_stage_s")
        }
    return {
        "wall_s_median": statistics.median(r["wall_s"] for r in runs),
        "wall_s": [r["wall_s"] for r in runs],
        "applications": runs[0]["applications"],
        "per_stage_median": per_stage,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench overhead", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="finegrained-bench-"))
    dags = setup(home)
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for i in range(args.repeats):
        for variant in VARIANTS if i % 2 == 0 else reversed(list(VARIANTS)):  # alternate to spread drift
            runs[variant].append(run_variant(dags, variant))
            print(f"repeat {i + 1} {variant}: {runs[variant][-1]['wall_s']:.1f} s", flush=True)
    summary = {v: summarize(r) for v, r in runs.items()}
    machine = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
        "load_avg_1m": os.getloadavg()[0],
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "overhead.json").write_text(json.dumps({"machine": machine, "summary": summary, "runs": runs}, indent=2))
    lines = [f"Command: `python -m bench overhead --repeats {args.repeats}`; machine: {machine}", ""]
    lines += ["| variant | Spark applications | pipeline wall time (median s) |", "|---|---:|---:|"]
    lines += [f"| {v} | {s['applications']} | {s['wall_s_median']:.1f} |" for v, s in summary.items()]
    lines += [
        "",
        "Per stage, medians in seconds (provider: inputs + decide; Spark: submit for the region, stage work):",
        "",
    ]
    lines += [
        "| variant | stage | inputs (XCom, checks, measuring) | decide (plan, size) | region submit | stage work |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for v, s in summary.items():
        for stage, t in s["per_stage_median"].items():
            lines.append(
                f"| {v} | {stage} | {t['inputs_s']:.3f} | {t['decide_s']:.4f} | {t['submit_s']:.1f} | "
                f"{t['spark_stage_s']:.2f} |"
            )
    text = "\n".join(lines) + "\n"
    (RESULTS / "overhead.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
