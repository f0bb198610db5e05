"""Stage start latency, warm against cold, side by side in one run.

Cold: a spark-submit of a one-stage PySpark driver, from launch until its SparkSession holds the
stage's settings (what every cold region pays before its first Spark job). Warm: a Spark Connect
session of a running pool holding the same settings, (a) in a process that already imported pyspark
(a region's second and later stages), (b) in a fresh Python process (the first stage of a task).
Each latency also runs the stage's first trivial query (``spark.range(1).count()``).

    python -m bench warm-start --repeats 5

Writes bench/results/warm-start.json and prints a table.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.lib.report import load_1m, machine_brief, write_json
from bench.lib.session import CONNECT_TOKEN_ENV, remote_session, spark_submit, spark_submit_env
from bench.lib.stats import median

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"

# Prints when the session holds the stage's settings, then after the first query.
STAGE = """
import sys, time
from pyspark.sql import SparkSession
builder = SparkSession.builder.remote(sys.argv[1]) if len(sys.argv) > 1 else SparkSession.builder
spark = builder.create() if len(sys.argv) > 1 else builder.getOrCreate()
spark.conf.set("spark.sql.shuffle.partitions", "3")
print("READY", time.time(), flush=True)
spark.range(1).count()
print("QUERIED", time.time(), flush=True)
spark.stop()
"""


def _launch(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Seconds from launch to READY and to QUERIED."""
    start = time.time()
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, check=True)
    marks = dict(line.split()[:2] for line in done.stdout.splitlines() if line.startswith(("READY", "QUERIED")))
    return float(marks["READY"]) - start, float(marks["QUERIED"]) - start


def cold(script: Path, repeats: int) -> list[tuple[float, float]]:
    """[(ready, queried)] of a plain spark-submit of the stage, ``repeats`` times."""
    conf = {"spark.ui.showConsoleProgress": "false"}
    command = spark_submit(script, master="local[2]", conf=conf, name="bench-cold-stage")
    return [_launch(command, spark_submit_env()) for _ in range(repeats)]


def warm_fresh_process(script: Path, pool: Any, repeats: int) -> list[tuple[float, float]]:
    # The pool's token through the environment, never argv; with a token pyspark needs "localhost" for 127.0.0.1.
    url = pool.url.replace("127.0.0.1", "localhost")
    env = {**os.environ, CONNECT_TOKEN_ENV: pool.token or ""}
    return [_launch([sys.executable, str(script), url], env) for _ in range(repeats)]


def client_import_s(repeats: int) -> float:
    """Median seconds a fresh Python process takes to import pyspark's Spark Connect client."""
    code = "import time; t = time.perf_counter(); import pyspark.sql.connect.session; print(time.perf_counter() - t)"
    runs = [
        float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
        for _ in range(repeats)
    ]
    return float(median(runs) or 0.0)


def warm_in_process(url: str, repeats: int) -> list[tuple[float, float]]:
    """[(ready, queried)] per session, in this process (which has imported pyspark already)."""
    runs = []
    for _ in range(repeats):
        clock = time.perf_counter()
        spark = remote_session(url)
        spark.conf.set("spark.sql.shuffle.partitions", "3")
        ready = time.perf_counter() - clock
        spark.range(1).count()
        runs.append((ready, time.perf_counter() - clock))
        spark.stop()
    return runs


def _summary(runs: list[tuple[float, float]]) -> dict[str, Any]:
    return {
        "ready_s": [round(r, 3) for r, _ in runs],
        "queried_s": [round(q, 3) for _, q in runs],
        "median_ready_s": round(median(r for r, _ in runs) or 0.0, 3),
        "median_queried_s": round(median(q for _, q in runs) or 0.0, 3),
    }


def measure_all(repeats: int) -> dict[str, Any]:
    """Every latency against one pool started here (and stopped after): the pool's start, in this process,
    the Connect client's import, in a fresh process, and a cold spark-submit."""
    from airflow_provider_finegrained import warm
    from airflow_provider_finegrained.settings import ConnectionSettings

    with tempfile.TemporaryDirectory(prefix="bench-warm-") as tmp:
        script = Path(tmp) / "stage.py"
        script.write_text(STAGE)
        settings = ConnectionSettings(
            master="local[2]", storage_root=tmp, total_cores=2, total_memory=4 * 2**30, warm_pool="auto"
        )
        clock = time.perf_counter()
        pool = warm.ensure_started(settings)
        pool_start_s = time.perf_counter() - clock
        assert pool.folder is not None  # a pool this process started has its folder
        try:
            in_process = warm_in_process(warm.client_url(pool.url, pool.token), repeats + 1)
            imported = client_import_s(repeats)
            fresh = warm_fresh_process(script, pool, repeats)
            cold_runs = cold(script, repeats)
            idle = warm.status(pool.folder) or {}
        finally:
            warm.stop(pool.folder)
    return {
        "pool_start_s": round(pool_start_s, 2),
        "pool_rss_bytes": idle.get("rss_bytes"),
        "connect_client_import_s": round(imported, 3),
        # The first session of a process also opens the gRPC channel: reported apart.
        "warm_first_session_in_process": _summary(in_process[:1]),
        "warm_in_process": _summary(in_process[1:]),
        "warm_fresh_process": _summary(fresh),
        "cold_spark_submit": _summary(cold_runs),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench warm-start", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS / "warm-start.json")
    args = parser.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    load_at_start = load_1m()
    measured = measure_all(args.repeats)
    result = {
        "command": f"python -m bench warm-start --repeats {args.repeats}",
        # Other work on the machine inflates every figure: the load when the run started and ended.
        "machine": machine_brief([load_at_start, load_1m()]),
        **measured,
    }
    write_json(args.out, result, indent=1)
    rows = [
        ("cold: spark-submit", result["cold_spark_submit"]),
        ("warm: fresh Python process", result["warm_fresh_process"]),
        ("warm: in a running process", result["warm_in_process"]),
    ]
    print(f"{'stage start':<30} {'ready (median s)':>17} {'first query (median s)':>23}")
    for name, data in rows:
        print(f"{name:<30} {data['median_ready_s']:>17.2f} {data['median_queried_s']:>23.2f}")
    print(f"pool start {result['pool_start_s']} s; results in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
