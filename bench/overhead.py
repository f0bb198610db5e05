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
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.lib.airflow import airflow_env, migrate
from bench.lib.provider import stage_report
from bench.lib.report import write_results
from bench.lib.stats import median
from bench.lib.sweep import alternating

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
    """A migrated Airflow home with the two DAGs, made this process's (``dag.test()`` runs in it)."""
    dags = home / "dags"
    dags.mkdir(parents=True)
    os.environ.update(airflow_env(home))
    for variant, mode in VARIANTS.items():
        (dags / f"{variant}.py").write_text(DAG.format(dag_id=f"overhead_{variant}", mode=mode))
    migrate(os.environ)
    return dags


def run_variant(dags: Path, variant: str) -> dict[str, Any]:
    from airflow.dag_processing.dagbag import DagBag

    dag_id = f"overhead_{variant}"
    dag = DagBag(dag_folder=str(dags / f"{variant}.py"), safe_mode=False).dags[dag_id]
    start = time.perf_counter()
    run = dag.test()
    wall = time.perf_counter() - start
    if run.state != "success":
        raise RuntimeError(f"{dag_id} ended {run.state}")
    results = stage_report(dag_id, os.environ, run.run_id)["stages"]
    stages = {name: r["trace"]["timings"] for name, r in results.items()}
    return {
        "wall_s": wall,
        "stages": stages,
        "applications": len({r["trace"]["application_id"] for r in results.values()}),
    }


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    per_stage: dict[str, dict[str, float | None]] = {}
    for name in runs[0]["stages"]:
        per_stage[name] = {
            key: median(r["stages"][name].get(key, 0.0) for r in runs)
            for key in ("inputs_s", "decide_s", "submit_s", "spark_stage_s")
        }
    return {
        "wall_s_median": median(r["wall_s"] for r in runs),
        "wall_s": [r["wall_s"] for r in runs],
        "applications": runs[0]["applications"],
        "per_stage_median": per_stage,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench overhead", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    dags = setup(Path(tempfile.mkdtemp(prefix="finegrained-bench-")))
    runs: dict[str, list[dict[str, Any]]] = {v: [] for v in VARIANTS}
    for i in range(args.repeats):
        for variant in alternating(list(VARIANTS), i):  # alternate to spread drift
            runs[variant].append(run_variant(dags, variant))
            print(f"repeat {i + 1} {variant}: {runs[variant][-1]['wall_s']:.1f} s", flush=True)
    summary = {v: summarize(r) for v, r in runs.items()}
    machine = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "date": time.strftime("%Y-%m-%d"),
        "load_avg_1m": os.getloadavg()[0],
    }
    text = render(summary, machine, args.repeats)
    write_results(RESULTS / "overhead.json", {"machine": machine, "summary": summary, "runs": runs}, text)
    print(text)
    return 0


def render(summary: dict[str, Any], machine: dict[str, Any], repeats: int) -> str:
    lines = [f"Command: `python -m bench overhead --repeats {repeats}`; machine: {machine}", ""]
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
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
