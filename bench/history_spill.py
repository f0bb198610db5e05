"""A stage that spills when sized from its bytes on disk, and what its learned memory factor does about it.

``.venv/bin/python -m bench.history_spill [--rows 400000] [--fanout 16] [--driver-memory 768m]
[--sequence UUUCUC]``

One stage (its own region, local[2], no warm pool, so ``driver_memory`` is the whole budget) reads a small
parquet input and explodes every row ``fanout`` times, then a window over the exploded rows sorts them
per key: its in-memory work is many times its bytes on disk, so the decision from bytes on disk (one task,
the profile's memory expansion 3.0 keeps the memory floor at 1) sorts everything in one task and spills.
``history_min_runs`` = 3: the first three runs decide from bytes on disk and record Spark's measurement;
from the fourth the stage decides from ``bytes x learned expansion`` and its memory floor uses the learned
memory factor. ``--sequence`` orders the runs: ``U`` a run with the history used when it has 3 runs
(learning), ``C`` the same, ``X`` a run that records but never applies it (``history_min_runs`` = 1000,
uncorrected), so corrected and uncorrected runs can alternate under the same machine load. Per run: the
decided shuffle partitions and scan split, the rule, Spark's spill bytes (memory and disk), the stage's
Spark time, the learned factors, and the load average.

Results: bench/results/history_spill.json and history_spill.md.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.compare.report import machine_info
from bench.compare.runners import REPO, airflow_env, first_json

RESULTS = REPO / "bench" / "results"
DAG_ID = "history_spill"
STAGE = "explode_sort"
SPARK_STAGE_FIELDS = (
    "stage_id", "tasks", "shuffle_read_bytes", "peak_execution_memory", "memory_bytes_spilled", "disk_bytes_spilled",
    "run_time_s",
)  # fmt: skip

DAG_TEXT = '''
import pendulum
from airflow.sdk import DAG
from airflow_provider_finegrained.dags.declaration import ExternalDataset
from airflow_provider_finegrained.operators.spark_stage import SparkStageOperator as Stage

FANOUT = {fanout}


def explode_sort(spark, rows):
    """Every row FANOUT times, then a window sorted by (v, i) within each key: the sort holds all of them."""
    from pyspark.sql import Window, functions as F

    exploded = rows.select("k", "v", F.explode(F.sequence(F.lit(1), F.lit(FANOUT))).alias("i"))
    ordered = exploded.withColumn("last", F.last("i").over(Window.partitionBy("k").orderBy("v", "i")))
    return ordered.groupBy("k").agg(F.max("last").alias("last"), F.count("*").alias("n"))


with DAG("{dag_id}", schedule=None, start_date=pendulum.datetime(2026, 1, 1, tz="UTC")):
    Stage(task_id="{stage}", python_callable=explode_sort, inputs={{"rows": ExternalDataset(path={path!r})}})
'''


def write_input(folder: Path, rows: int, files: int = 4) -> int:
    """``rows`` rows of (k, v) in ``files`` parquet files (1 MiB row groups); returns the bytes on disk."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(16)
    per_file = -(-rows // files)
    for n in range(files):
        ids = np.arange(n * per_file, min(rows, (n + 1) * per_file), dtype=np.int64)
        values = [f"{x:016x}" for x in rng.integers(0, 2**63, size=len(ids), dtype=np.int64)]
        table = pa.table({"k": ids % max(1, rows // 8), "v": values})
        pq.write_table(table, folder / f"part-{n:05d}.parquet", row_group_size=max(1, len(ids) // 8))
    return sum(p.stat().st_size for p in folder.glob("*.parquet"))


def _airflow() -> str:
    return str(Path(sys.executable).parent / "airflow")


def prepare(home: Path, data: Path, fanout: int) -> None:
    dags = home / "dags"
    dags.mkdir(parents=True, exist_ok=True)
    text = DAG_TEXT.format(fanout=fanout, dag_id=DAG_ID, stage=STAGE, path=str(data))
    (dags / f"{DAG_ID}.py").write_text(textwrap.dedent(text))
    subprocess.run([_airflow(), "db", "migrate"], check=True, capture_output=True, env=airflow_env(home), timeout=900)


def run_once(home: Path, min_runs: int, driver_memory: str, log: Path) -> dict[str, Any]:
    """One ``airflow dags test`` of the DAG; the stage's trace and history record as the provider left them."""
    from airflow_provider_finegrained.execution.history_store import HistoryStore
    from airflow_provider_finegrained.planning.history import run_from_trace

    env = airflow_env(
        home,
        {
            "AIRFLOW__FINEGRAINED__WARM_POOL": "off",
            "AIRFLOW__FINEGRAINED__DRIVER_MEMORY": driver_memory,
            "AIRFLOW__FINEGRAINED__LEARN_FROM_HISTORY": "true",
            "AIRFLOW__FINEGRAINED__HISTORY_MIN_RUNS": str(min_runs),
        },
    )
    load = os.getloadavg()
    clock = time.perf_counter()
    with log.open("w") as out:
        proc = subprocess.run(
            [_airflow(), "dags", "test", DAG_ID], env=env, stdout=out, stderr=subprocess.STDOUT, timeout=1800
        )
    wall = time.perf_counter() - clock
    done = subprocess.run(
        [sys.executable, "-m", "airflow_provider_finegrained", "report", DAG_ID, "--json"],
        env=env, capture_output=True, text=True, timeout=600, check=True,
    )  # fmt: skip
    report = first_json(done.stdout)
    result = report["stages"][STAGE]
    trace = result["trace"]
    if proc.returncode != 0:
        raise RuntimeError(f"dags test exited {proc.returncode}; log: {log}")
    record = run_from_trace(trace, report["run_id"], succeeded=True)
    stored = HistoryStore(str(home / "finegrained" / "storage"), DAG_ID).runs(STAGE, limit=1000)
    assert any(r.run_id == report["run_id"] for r in stored), "the run left no history record"
    conf = trace.get("spark_conf") or {}
    return {
        "run_id": report["run_id"],
        "wall_s": wall,
        "load_before": [round(x, 2) for x in load],
        "load_after": [round(x, 2) for x in os.getloadavg()],
        "rule": trace["rule"],
        "corrected": record.learned_work is not None,
        "learned": trace.get("learned"),
        "shuffle_partitions": int(conf.get("spark.sql.shuffle.partitions", trace["parallelism"])),
        "max_partition_bytes": conf.get("spark.sql.files.maxPartitionBytes"),
        "memory_floor_notes": [n for n in trace.get("sizing_notes", []) if "memory floor" in n or "scan" in n],
        "consumed_bytes": record.consumed_bytes,
        "shuffle_bytes": record.shuffle_bytes,
        "memory_bytes": record.memory_bytes,
        "spill_bytes": record.spilled_bytes,
        "disk_spill_bytes": record.disk_spilled_bytes,
        "stage_s": record.stage_s,
        "spark_stages": [
            {k: s.get(k) for k in SPARK_STAGE_FIELDS} for s in (trace.get("spark_tasks") or {}).get("spark_stages", [])
        ],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.history_spill", description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400_000)
    parser.add_argument("--fanout", type=int, default=16)
    parser.add_argument("--driver-memory", default="768m")
    parser.add_argument("--sequence", default="UUUCXC", help="U/C: history used from 3 runs on; X: never applied")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a new temporary one)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if set(args.sequence) - set("UCX"):
        parser.error(f"--sequence takes U, C and X only, got {args.sequence!r}")
    command = "python -m bench.history_spill " + shlex.join(list(argv if argv is not None else sys.argv[1:]))
    work = args.work or Path(tempfile.mkdtemp(prefix="finegrained-history-spill-"))
    home = work / "airflow-home"
    data = work / "rows"
    on_disk = write_input(data, args.rows)
    prepare(home, data, args.fanout)
    runs: list[dict[str, Any]] = []
    for i, kind in enumerate(args.sequence, 1):
        result = run_once(home, 1000 if kind == "X" else 3, args.driver_memory, work / f"run-{i}.log")
        runs.append({"run": i, "kind": kind, **result})
        print(
            f"run {i} ({kind}): P {result['shuffle_partitions']} {result['rule']!r} spill "
            f"{result['spill_bytes'] / 1e6:.1f} MB, stage {result['stage_s']} s, wall {result['wall_s']:.1f} s",
            flush=True,
        )
        write(args, command, on_disk, runs)
    return 0


def write(args: argparse.Namespace, command: str, on_disk: int, runs: list[dict[str, Any]]) -> None:
    doc = {
        "command": command,
        "rows": args.rows,
        "fanout": args.fanout,
        "driver_memory": args.driver_memory,
        "input_bytes_on_disk": on_disk,
        "machine": machine_info(),
        "runs": runs,
    }
    (args.results / "history_spill.json").write_text(json.dumps(doc, indent=2) + "\n")
    (args.results / "history_spill.md").write_text(markdown(doc))


def markdown(doc: dict[str, Any]) -> str:
    kinds = {"U": "learning (uncorrected until 3 runs)", "C": "history applied", "X": "uncorrected (not applied)"}
    lines = [
        "# A stage that spills: uncorrected against its learned memory factor",
        "",
        f"Command: `{doc['command']}`. Input: {doc['rows']} rows, {doc['input_bytes_on_disk'] / 1e6:.2f} MB of "
        f"parquet on disk, each row exploded {doc['fanout']}x and sorted per key in a window; local[2], "
        f"driver_memory {doc['driver_memory']}, history_min_runs 3. Every figure is one run.",
        "",
        "| run | kind | rule | shuffle partitions | scan split | learned work / memory | spill MB (memory) "
        "| spill MB (disk) | peak+spill / consumed | stage s | load (1 min) |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in doc["runs"]:
        learned = r["learned"] or {}
        lines.append(
            f"| {r['run']} | {kinds.get(r['kind'], r['kind'])} | {'learned' if r['corrected'] else 'bytes'} "
            f"| {r['shuffle_partitions']} | {r['max_partition_bytes']} "
            f"| {learned.get('work', '-') if r['corrected'] else '-'} / {learned.get('memory') or '-'} "
            f"| {r['spill_bytes'] / 1e6:.1f} | {r['disk_spill_bytes'] / 1e6:.1f} "
            f"| {r['memory_bytes'] / r['consumed_bytes']:.1f} | {_seconds(r['stage_s'])} | {r['load_before'][0]} |"
        )
    return "\n".join([*lines, ""])


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


if __name__ == "__main__":
    raise SystemExit(main())
