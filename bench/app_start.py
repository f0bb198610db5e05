"""``python -m bench app-start``: what an application's and an executor's start cost, measured apart.

The loopback model charges every application's start (spark-submit, the driver JVM, SparkContext,
Python) as CPU work on the shared cores before its first job. This measures it: a PySpark driver that
creates its SparkSession, runs one trivial job and stops, launched with the provider's own spark-submit
command, one at a time on an otherwise idle machine. CPU is the process tree's user + system seconds
(every descendant its parent waited for: the JVM, the Python driver).

    .venv/bin/python -m bench app-start --repeats 5

Also where, within that start, the event log's ApplicationStart falls (the SparkContext's beginning: item
2 counts an application's queueing from it), and an executor's start: its JVM's CPU from launch to
registration, on a one-worker standalone cluster on 127.0.0.1. Writes bench/results/app-start.json; the
simulator's loopback model (``bench.simulate.loopback.fit_loopback``) reads ``median_cpu_s``,
``median_context_share`` and the executor's ``median_cpu_s`` from that file. It starts Spark, so it lives
beside the other experiments, not in the simulator (which imports only the planning core).
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

RESULTS = Path(__file__).resolve().parent / "results"
APP_START_FILE = "app-start.json"
"""The results file the simulator's loopback model reads (``bench.simulate.loopback.APP_START_FILE``)."""

DRIVER = """
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
spark.range(10).count()
spark.stop()
"""


def _spark_env() -> dict[str, str]:
    from bench.lib.session import spark_submit_env

    return spark_submit_env()


def measure(repeats: int) -> dict[str, Any]:
    """Launch the trivial driver ``repeats`` times; CPU and wall seconds of each launch."""
    from bench.lib.measure import run_measured
    from bench.lib.session import spark_submit

    load = os.getloadavg()[0]
    env = _spark_env()
    runs = []
    context_shares = []
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "trivial_app.py"
        script.write_text(DRIVER)
        for attempt in range(repeats):
            logs = Path(folder) / f"events-{attempt}"
            logs.mkdir()
            command = spark_submit(
                script,
                master="local[1]",
                name="bench-app-start",
                conf={
                    "spark.ui.showConsoleProgress": "false",
                    "spark.eventLog.enabled": "true",
                    "spark.eventLog.dir": logs.as_uri(),
                    "spark.eventLog.compress": "false",
                },
            )
            launched = time.time()
            run = run_measured(command, env, timeout_s=600)
            if run.returncode != 0:
                raise RuntimeError(f"the trivial application failed ({run.returncode}): {run.output_tail}")
            runs.append(run)
            context_shares.append(round(context_share(logs, launched), 3))
    cpu = [round(r.cpu_s, 2) for r in runs]
    wall = [round(r.wall_s, 2) for r in runs]
    return {
        "command": "python -m bench app-start " + " ".join(sys.argv[1:]),
        "machine": f"{platform.node()} {platform.platform()}, Python {platform.python_version()}",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "driver": DRIVER.strip(),
        "master": "local[1]",
        "cpu_s": cpu,
        "wall_s": wall,
        "median_cpu_s": statistics.median(cpu),
        "median_wall_s": statistics.median(wall),
        "context_share": context_shares,
        "median_context_share": statistics.median(context_shares),
        "load_average_at_start": load,
    }


EXECUTOR_DRIVER = """
import time
import psutil
from pyspark.sql import SparkSession
spark = SparkSession.builder.getOrCreate()
status = spark.sparkContext._jsc.sc()
while status.getExecutorMemoryStatus().size() < 2:  # the driver's block manager and one executor's
    time.sleep(0.05)
backend = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
app = spark.sparkContext.applicationId  # this application's executor, not another Spark's on the machine
(executor,) = [
    p for p in psutil.process_iter(["cmdline"]) if backend in (p.info["cmdline"] or []) and app in p.info["cmdline"]
]
times = executor.cpu_times()
print("EXECUTOR", times.user + times.system, time.time() - executor.create_time(), flush=True)
spark.stop()
"""


def measure_executor(repeats: int) -> dict[str, Any]:
    """An executor's start on a one-worker standalone cluster on 127.0.0.1: its JVM's CPU from launch to
    registration with the driver (the driver reads it when the executor appears), and the wall time."""
    from bench.lib.provider import start_cluster
    from bench.lib.session import spark_submit

    env = _spark_env()
    cpu, wall = [], []
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "executor_start.py"
        script.write_text(EXECUTOR_DRIVER)
        cluster = start_cluster(Path(folder) / "cluster", workers=1, cores=1, memory="2g")
        try:
            command = spark_submit(
                script,
                master=cluster.master_url,
                name="bench-executor-start",
                conf={"spark.ui.showConsoleProgress": "false", "spark.executor.memory": "1g", "spark.cores.max": "1"},
            )
            for _ in range(repeats):
                done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
                marks = [line.split() for line in done.stdout.splitlines() if line.startswith("EXECUTOR ")]
                if done.returncode != 0 or not marks:
                    raise RuntimeError(f"the executor-start driver failed ({done.returncode}): {done.stderr[-2000:]}")
                cpu.append(round(float(marks[0][1]), 2))
                wall.append(round(float(marks[0][2]), 2))
        finally:
            cluster.stop()
    return {
        "cpu_s": cpu,
        "wall_s": wall,
        "median_cpu_s": statistics.median(cpu),
        "median_wall_s": statistics.median(wall),
    }


def context_share(logs: Path, launched: float) -> float:
    """Where the event log's start falls in an application's start: (ApplicationStart - launch) / (first job - launch).

    ApplicationStart's timestamp is when the SparkContext began (item 2 counts queueing from it); the first
    job's submission is when the start ends.
    """
    # Spark 4 writes a folder per application (eventlog_v2_*) holding events_<n>_* files and an appstatus marker.
    files = sorted(p for p in logs.rglob("*") if p.is_file() and p.name.startswith(("events", "local-")))
    context = job = None
    for line in (line for f in files for line in f.read_text().splitlines()):
        event = json.loads(line)
        if event["Event"] == "SparkListenerApplicationStart":
            context = event["Timestamp"] / 1000
        elif event["Event"] == "SparkListenerJobStart" and job is None:
            job = event["Submission Time"] / 1000
    if context is None or job is None or job <= launched:
        raise ValueError(f"{logs}: no application start or job after the launch in {[f.name for f in files]}")
    return float((context - launched) / (job - launched))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench app-start", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be >= 1")
    result = measure(args.repeats)
    result["executor"] = measure_executor(args.repeats)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / APP_START_FILE).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("cpu_s", "wall_s", "median_cpu_s", "median_context_share", "executor")}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
