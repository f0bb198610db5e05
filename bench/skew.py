"""Benchmark: a consumer stage over skewed input, with Spark's defaults, the provider's sizing, and its balance.

The data set: a fact table whose join keys follow a Zipf law (exponent ``ZIPF_S`` = 1.2 over ``KEYS``
keys: the hottest key holds 1 - 2^-0.2 = 12.9% of the rows, the next ones 6.8%, 4.5%...), written as a
producer partitioned by the key writes it: ``FILES`` (200, Spark's default shuffle partitions) parquet
files, so the hot key's rows are one file about 30x the median file. A dimension table of ``KEYS`` rows.
The consumer stage joins them on the key (broadcast joins off, as for a dimension too large to
broadcast), aggregates per dimension group, and writes the result.

Three variants run side by side in ONE warm ``local[2]`` session, in alternating order, ``--reps`` times:

- ``spark-defaults``: 200 shuffle partitions, AQE on with Spark's defaults, 128 MiB splits, 4 MiB open
  cost, upstream written with parquet's 128 MiB row groups;
- ``sizing``: the provider's decision with its balance undone (shuffle partitions from the decision,
  ``maxPartitionBytes`` from bytes / parallelism, Spark's open cost; AQE towards ``avg_bytes_per_task`` with
  Spark's skew thresholds), upstream written with parquet's default row groups;
- ``balance``: the provider's decision (``decide_region`` for the consumer alone over the measured file
  sizes, as ``finegrained size`` decides: split, open cost, AQE's advisory size, skew-join thresholds and
  coalesce floor), upstream written with the producer's ``write_options`` (row groups for its consumers'
  splits).
- ``balance-16m-row-groups``, ``balance-128m-row-groups`` (only with ``--variants``): the balance's
  settings over an upstream written with 16 MiB row groups, or the one ``spark-defaults`` reads (parquet's
  128 MiB), to isolate what the producer's row-group size costs or saves the scan.

Per run, from Spark's REST API (``/api/v1/applications/<app>/stages/<id>/<attempt>/taskList``): the fact
scan's task input (``inputMetrics.recordsRead``: Spark's ``bytesRead`` counts little of a parquet read in
this setup, and the rows are all about the same size) and the join stage's task shuffle-read bytes (local +
remote), as max/median; and the stage's wall time. Per scan and join stage, where the time went: the
stage's wall time (submission to completion), the tasks' summed duration, the longest task, and the
tasks' deserialization and scheduler delay (the per-task overhead the balance trades against). Also the
1-minute load average (the machine is shared).

Usage::

    python -m bench skew [--reps 3] [--rows 4000000] [--zipf 1.2] [--name skew]
    python -m bench skew --reps 3 --rows 2000000 --zipf 3 --name skew-hot  # a 75% hot key
    python -m bench skew --reps 5 --rows 12000000 --zipf 3 --name skew-row-groups \
        --variants spark-defaults,balance,balance-16m-row-groups,balance-128m-row-groups  # row groups' cost
    python -m bench skew --rerender bench/results/skew.json

Results: ``bench/results/skew.json`` and ``bench/results/skew.md``. Data lives in a temp dir, deleted after.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from airflow_provider_finegrained.execution.decision import adaptive_conf, write_options
from airflow_provider_finegrained.planning import ClusterProfile, ParallelismConfig
from bench.lib.report import command_line, write_results
from bench.lib.session import SPARK_DEFAULTS, apply_conf, decide_alone, file_sizes, local_session
from bench.lib.spark_metrics import application_api, get_json, tagged_stage_ids
from bench.lib.stats import SIGNIFICANCE, max_over_median, slower_p_value
from bench.lib.sweep import in_turn

MIB = 2**20
FILES = 200
ZIPF_S = 1.2
KEYS = 50_000
DIM_FILES = 4
AVG_BYTES_PER_TASK = 8 * MIB
VARIANTS = ("spark-defaults", "sizing", "balance")
"""The variants the goal compares (run by default)."""
ROW_GROUPS = "balance-128m-row-groups"
ROW_GROUP_VARIANTS = {"balance-16m-row-groups": 16 * MIB, ROW_GROUPS: None}
"""The balance over an upstream written with these row groups (None: parquet's default, the one
``spark-defaults`` reads)."""
ALL_VARIANTS = (*VARIANTS, *ROW_GROUP_VARIANTS)
RESULTS = Path(__file__).resolve().parent / "results"
SKEW_KEYS = (
    "spark.sql.adaptive.skewJoin.enabled",
    "spark.sql.adaptive.skewJoin.skewedPartitionFactor",
    "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes",
)
PROFILE = ClusterProfile(total_cores=2, total_memory=4 * 2**30, executor_memory=2 * 2**30, local=True)
"""The session's: local[2] with a 2 GiB driver."""


def hot_key_share(zipf_s: float) -> float:
    """P(key = 1) of the generator below: floor((1 - u) ** (-1 / (s - 1))) is 1 for u < 1 - 2^-(s-1)."""
    return float(1 - 2 ** -(zipf_s - 1))


# ---------------------------------------------------------------- the data


def write_fact(spark: Any, path: Path, rows: int, options: dict[str, str], zipf_s: float = ZIPF_S) -> None:
    """FILES part files hash-partitioned by the Zipf key (a hot key's rows in one file); incompressible payload."""
    from pyspark.sql import functions as F

    u = F.rand(seed=7)
    # clamp before floor: (1 - u) ** -5 overflows a long for u near 1 (ANSI mode fails the cast)
    key = F.floor(F.least(F.pow(F.lit(1.0) - u, F.lit(-1.0 / (zipf_s - 1))), F.lit(float(KEYS)))).cast("long")
    df = spark.range(0, rows, 1, 8).select(
        key.alias("key"),
        (F.rand(seed=11) * 100).alias("value"),
        F.sha2(F.col("id").cast("string"), 256).alias("payload"),
    )
    df.repartition(FILES, "key").write.options(**options).mode("overwrite").parquet(str(path))


def write_dim(spark: Any, path: Path) -> None:
    from pyspark.sql import functions as F

    dim = spark.range(1, KEYS + 1, 1, DIM_FILES).select(
        F.col("id").alias("key"), (F.col("id") % 100).alias("grp"), F.md5(F.col("id").cast("string")).alias("name")
    )
    dim.write.mode("overwrite").parquet(str(path))


def largest_first(path: Path) -> list[int]:
    return sorted(file_sizes(path), reverse=True)


def row_groups(path: Path) -> dict[str, int]:
    """The largest file's row groups: how many, and the largest one's compressed bytes (from its footer)."""
    import pyarrow.parquet as pq

    largest = max(path.glob("*.parquet"), key=lambda p: p.stat().st_size)
    meta = pq.ParquetFile(largest).metadata
    sizes = [
        sum(meta.row_group(i).column(c).total_compressed_size for c in range(meta.num_columns))
        for i in range(meta.num_row_groups)
    ]
    return {"count": meta.num_row_groups, "largest_bytes": max(sizes, default=0)}


def data_stats(path: Path) -> dict[str, Any]:
    sizes = largest_first(path)
    return {
        "files": len(sizes),
        "largest": sizes[0],
        "median": statistics.median(sizes),
        "largest_over_median": round(sizes[0] / statistics.median(sizes), 1),
        "total": sum(sizes),
        "largest_file_row_groups": row_groups(path),
    }


def write_upstreams(spark: Any, tmp: Path, args: argparse.Namespace, variants: list[str]) -> dict[str, Path]:
    """The fact table as each variant's producer wrote it: parquet's row groups, the provider's producer's
    (``write_options``), and the row groups of the row-group variants that run."""
    upstream = {"default": tmp / "fact-default", "balance": tmp / "fact-balance"}
    write_fact(spark, upstream["default"], args.rows, {}, args.zipf)
    write_fact(spark, upstream["balance"], args.rows, producer_options(), args.zipf)
    for variant, row_group in ROW_GROUP_VARIANTS.items():
        if row_group is not None and variant in variants:
            upstream[variant] = tmp / f"fact-{variant}"
            write_fact(spark, upstream[variant], args.rows, {"parquet.block.size": str(row_group)}, args.zipf)
    return upstream


def reads(variant: str) -> str:
    """Which upstream ``variant`` reads (a key of :func:`write_upstreams`)."""
    if variant == "balance":
        return "balance"
    return variant if ROW_GROUP_VARIANTS.get(variant) is not None else "default"


def consumer(spark: Any, fact: Path, dim: Path, out: Path) -> None:
    from pyspark.sql import functions as F

    f = spark.read.parquet(str(fact)).select("key", "value", F.length("payload").alias("plen"))
    d = spark.read.parquet(str(dim))
    joined = f.join(d, "key")
    result = joined.groupBy("grp").agg(F.sum("value").alias("v"), F.sum("plen").alias("p"), F.count("*").alias("n"))
    result.write.mode("overwrite").parquet(str(out))


# ---------------------------------------------------------------- the settings, from the provider's decision


def producer_options() -> dict[str, str]:
    """The row groups the provider's producer writes for consumers of ``AVG_BYTES_PER_TASK`` (its decision)."""
    return write_options("parquet", [ParallelismConfig(avg_bytes_per_task=AVG_BYTES_PER_TASK)])


def decided_conf(variant: str, files: list[int], dim_files: list[int]) -> tuple[dict[str, str], dict[str, Any]]:
    """A variant's session settings and what it decided: Spark's defaults, or the provider's decision for the
    consumer over these files (``sizing``: with its balance undone)."""
    if variant == "spark-defaults":
        return dict(SPARK_DEFAULTS), {}
    config = ParallelismConfig(avg_bytes_per_task=AVG_BYTES_PER_TASK)
    stage = decide_alone("consumer", {"fact": files, "dim": dim_files}, config, PROFILE)
    sizing = stage.sizing
    decided: dict[str, Any] = {"parallelism": sizing.parallelism, "input_balance": dict(sizing.input_balance or {})}
    if variant != "sizing":
        adaptive = dict(stage.trace.input_balance["adaptive"])
        adaptive.pop("applies", None)
        return dict(stage.session_conf), decided | {"adaptive": adaptive}
    # The provider before the balance: the split from bytes / parallelism, Spark's open cost, AQE towards the
    # bytes per task with Spark's skew thresholds.
    conf = {
        **stage.session_conf,
        **adaptive_conf(True, config, None, sizing.coalesce_floor),
        "spark.sql.files.maxPartitionBytes": str(sizing.max_partition_bytes),
        **{k: SPARK_DEFAULTS[k] for k in ("spark.sql.files.openCostInBytes", *SKEW_KEYS)},
    }
    return conf, decided | {"input_balance": {}}


# ---------------------------------------------------------------- what Spark measured


def stage_tasks(spark: Any, group: str) -> dict[str, Any]:
    """The fact scan's and the join stage's task bytes, and every stage's duration, from Spark's REST API."""
    sc = spark.sparkContext
    base = application_api(sc.uiWebUrl, sc.applicationId)
    stages = []
    for sid in tagged_stage_ids(get_json(f"{base}/jobs", 30), group, job_group=True):
        for attempt in get_json(f"{base}/stages/{sid}", 30):
            if attempt["status"] == "COMPLETE":
                tasks = get_json(f"{base}/stages/{sid}/{attempt['attemptId']}/taskList?offset=0&length=100000", 30)
                stages.append(_stage(sid, attempt, [t for t in tasks if t["status"] == "SUCCESS"]))
    # Spark's bytesRead counts little of a parquet read here (footers; FIELD-NOTES), so a scan task's input
    # is its recordsRead: the fact rows are all about the same size.
    scan = max(stages, key=lambda s: sum(s["records"]))
    join = max(stages, key=lambda s: sum(s["shuffle"]))
    return {
        "scan": _summary(scan["records"]),
        "scan_bytes_read": _summary(scan["input"]),
        "join": _summary(join["shuffle"]),
        "scan_tasks": scan["tasks"],
        "join_tasks": join["tasks"],
        "scan_timing": scan["timing"],
        "join_timing": join["timing"],
        "stages": [{k: s[k] for k in ("id", "name", "tasks", "seconds", "timing")} for s in stages],
    }


def _stage(sid: int, attempt: dict[str, Any], done: list[dict[str, Any]]) -> dict[str, Any]:
    """One completed Spark stage: its succeeded tasks' input, records, shuffle reads and time."""

    def shuffle_read(task: dict[str, Any]) -> int:
        read = task["taskMetrics"]["shuffleReadMetrics"]
        return int(read["localBytesRead"] + read["remoteBytesRead"])

    return {
        "id": sid,
        "name": attempt["name"],
        "tasks": len(done),
        "input": [t["taskMetrics"]["inputMetrics"]["bytesRead"] for t in done],
        "records": [t["taskMetrics"]["inputMetrics"]["recordsRead"] for t in done],
        "shuffle": [shuffle_read(t) for t in done],
        "seconds": sum(t["duration"] for t in done) / 1000,
        "timing": _timing(attempt, done),
    }


def _timing(attempt: dict[str, Any], done: list[dict[str, Any]]) -> dict[str, Any]:
    """A stage's wall time and where its tasks' time went (Spark's per-task metrics), in seconds."""

    def at(stamp: str) -> float:
        return float(dt.datetime.strptime(stamp.replace("GMT", "+0000"), "%Y-%m-%dT%H:%M:%S.%f%z").timestamp())

    def total(key: str) -> float:
        return round(sum(float(t["taskMetrics"][key]) for t in done) / 1000, 3)

    return {
        "wall": round(at(attempt["completionTime"]) - at(attempt["submissionTime"]), 3),
        "task_seconds": round(sum(t["duration"] for t in done) / 1000, 3),
        "run": total("executorRunTime"),
        "deserialize": total("executorDeserializeTime"),
        "scheduler_delay": round(sum(t.get("schedulerDelay", 0) for t in done) / 1000, 3),
        "longest_task": round(max((t["duration"] for t in done), default=0) / 1000, 3),
    }


def _summary(values: list[int]) -> dict[str, Any]:
    ordered = sorted(values)
    return {
        "tasks": len(values),
        "max": ordered[-1] if ordered else 0,
        "median": statistics.median(ordered) if ordered else 0,
        "max_over_median": round(max_over_median(ordered), 2),
    }


# ---------------------------------------------------------------- the run


def parse_args(argv: Sequence[str] | None) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(prog="python -m bench skew", description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--rows", type=int, default=4_000_000)
    parser.add_argument("--zipf", type=float, default=ZIPF_S, help="the keys' Zipf exponent (> 1)")
    parser.add_argument("--name", default="skew", help="results file name in bench/results (without suffix)")
    parser.add_argument("--rerender", type=Path, help="rewrite the summary and markdown of a results JSON")
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {ALL_VARIANTS}")
    args = parser.parse_args(argv)
    variants = [v for v in args.variants.split(",") if v]
    unknown = sorted(set(variants) - set(ALL_VARIANTS))
    if unknown or not variants:
        parser.error(f"--variants: unknown {unknown or 'none given'}; known: {', '.join(ALL_VARIANTS)}")
    return args, variants


def main(argv: list[str] | None = None) -> int:
    args, variants = parse_args(argv)
    if args.rerender:
        result = json.loads(args.rerender.read_text())
        result["summary"] = summarize(result["runs"])
        write_results(args.rerender, result, render(result))
        return 0
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="skew-bench-") as tmpdir:
        tmp = Path(tmpdir)
        spark = local_session("skew_bench", session_conf(tmp))
        spark.sparkContext.setLogLevel("ERROR")
        upstream = write_upstreams(spark, tmp, args, variants)
        write_dim(spark, tmp / "dim")
        data = {name: data_stats(path) for name, path in upstream.items()}
        runs = run_variants(spark, tmp, upstream, variants, args.reps)
        spark.stop()
    meta = {
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "command": command_line("skew", argv),
        "machine": f"{os.cpu_count()} cores, {platform.platform()}",
        "rows": args.rows,
        "reps": args.reps,
        "zipf_s": args.zipf,
        "keys": KEYS,
        "hot_key_share": round(hot_key_share(args.zipf), 3),
        "files": FILES,
        "avg_bytes_per_task": AVG_BYTES_PER_TASK,
        "producer_write_options": producer_options(),
        "wall_s": round(time.time() - started, 1),
    }
    result = {"meta": meta, "data": data, "summary": summarize(runs), "runs": runs}
    write_results(RESULTS / f"{args.name}.json", result, render(result))
    print(render(result))
    return 0


def session_conf(tmp: Path) -> dict[str, str]:
    """The one warm local[2] session's: broadcast joins off (a dimension too large to broadcast)."""
    return {
        "spark.driver.memory": "2g",
        "spark.local.dir": str(tmp / "spark-local"),
        "spark.sql.warehouse.dir": str(tmp / "warehouse"),
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        "spark.ui.port": "0",
        "spark.ui.retainedTasks": "1000000",
    }


def run_variants(spark: Any, tmp: Path, upstream: dict[str, Path], variants: list[str], reps: int) -> list[Any]:
    """Every variant ``reps`` times after a warm-up round (rep -1, not kept), each taking every place in turn."""
    dim_files = largest_first(tmp / "dim")
    runs: list[dict[str, Any]] = []
    for rep in range(-1, reps):
        for variant in in_turn(variants, rep + 1):
            fact = upstream[reads(variant)]
            conf, decided = decided_conf(variant, largest_first(fact), dim_files)
            apply_conf(spark, conf)
            group = f"{variant}-{rep}"
            spark.sparkContext.setJobGroup(group, group)
            load = os.getloadavg()[0]
            t0 = time.perf_counter()
            consumer(spark, fact, tmp / "dim", tmp / f"out-{group}")
            seconds = time.perf_counter() - t0
            metrics = stage_tasks(spark, group)
            print(
                f"rep {rep} {variant:15s} {seconds:6.2f}s  scan max/med {metrics['scan']['max_over_median']:5}"
                f" ({metrics['scan_tasks']} tasks)  join max/med {metrics['join']['max_over_median']:5}"
                f" ({metrics['join_tasks']} tasks)  load {load:.1f}",
                flush=True,
            )
            if rep >= 0:
                record = {"rep": rep, "variant": variant, "seconds": round(seconds, 3), "load_1m": load, **metrics}
                runs.append(record | {"conf": conf, **decided})
    return runs


def ran(runs: list[dict[str, Any]]) -> list[str]:
    """The variants these runs include, in ``ALL_VARIANTS`` order."""
    return [v for v in ALL_VARIANTS if any(r["variant"] == v for r in runs)]


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for variant in ran(runs):
        mine = [r for r in runs if r["variant"] == variant]
        out[variant] = {
            "seconds": round(statistics.median(r["seconds"] for r in mine), 2),
            "scan_max_over_median": statistics.median(r["scan"]["max_over_median"] for r in mine),
            "join_max_over_median": statistics.median(r["join"]["max_over_median"] for r in mine),
            "scan_tasks": statistics.median(r["scan_tasks"] for r in mine),
            "join_tasks": statistics.median(r["join_tasks"] for r in mine),
            **{
                f"{side}_{key}": round(statistics.median(r[f"{side}_timing"][key] for r in mine), 2)
                for side in ("scan", "join")
                for key in ("wall", "task_seconds", "longest_task")
                if all(f"{side}_timing" in r for r in mine)
            },
            "per_task_overhead_ms": _overhead_ms(mine),
            "load_1m": round(statistics.median(r["load_1m"] for r in mine), 2),
            "seconds_range": [min(r["seconds"] for r in mine), max(r["seconds"] for r in mine)],
        }
        predicted = [r["input_balance"].get("predicted_max_over_median") for r in mine if r.get("input_balance")]
        if predicted:
            out[variant]["predicted_scan_max_over_median"] = predicted[0]
    return out


def _overhead_ms(runs: list[dict[str, Any]]) -> float | None:
    """Median per-task deserialization + scheduler delay of the scan stage, in ms (None: not recorded)."""
    values = [
        (r["scan_timing"]["deserialize"] + r["scan_timing"]["scheduler_delay"]) * 1000 / r["scan_tasks"]
        for r in runs
        if "scan_timing" in r and r["scan_tasks"]
    ]
    return round(statistics.median(values), 1) if values else None


def render(result: dict[str, Any]) -> str:
    meta = result["meta"]
    lines = [
        "# Skewed consumer: Spark's defaults, the provider's sizing, and its input balance",
        "",
        f"`{meta['command']}` on {meta['machine']}, {meta['date']}; {meta['reps']} repetitions per variant "
        f"(medians), alternating order, one warm local[2] session; total {meta['wall_s']} s.",
        "",
        f"Data: {meta['rows']:,} fact rows, Zipf join keys (s = {meta['zipf_s']} over {meta['keys']:,} keys: the "
        f"hottest holds {meta['hot_key_share']:.1%} of the rows), written hash-partitioned by the key into "
        f"{meta['files']} files: largest/median file "
        f"{result['data']['default']['largest_over_median']}x (parquet's row groups), "
        f"{result['data']['balance']['largest_over_median']}x (producer row groups "
        f"{meta['producer_write_options']}). avg_bytes_per_task {meta['avg_bytes_per_task'] // MIB} MiB.",
        "",
    ]
    lines += _tables(result["summary"], ran(result["runs"]))
    record = next((r["input_balance"] for r in result["runs"] if r["variant"] == "balance"), None)
    if record and "cost" in record:
        lines += ["", f"Scan balance (`decide_balance`): {record['why']}."]
    adaptive = next((r["adaptive"] for r in result["runs"] if r["variant"] == "balance" and r.get("adaptive")), None)
    if adaptive:
        lines += ["", f"AQE sizes of the balance variant (`decide_adaptive`): {adaptive['why']}."]
    return "\n".join([*lines, *_goal(result["summary"], result["runs"])])


def _tables(s: dict[str, Any], variants: list[str]) -> list[str]:
    """The medians per variant and, where recorded, where the time went."""
    lines = [
        "| variant | stage time (s), median [range] | scan tasks | scan rows max/median | join tasks "
        "| join shuffle-read max/median | load (1 min) |",
        "|---|---|---|---|---|---|---|",
    ]
    for variant in variants:
        v = s[variant]
        predicted = v.get("predicted_scan_max_over_median")
        scan = f"{v['scan_max_over_median']}" + (f" (predicted {predicted})" if predicted is not None else "")
        lines.append(
            f"| {variant} | {v['seconds']} [{v['seconds_range'][0]:.1f}-{v['seconds_range'][1]:.1f}] | "
            f"{v['scan_tasks']:g} | {scan} | {v['join_tasks']:g} | "
            f"{v['join_max_over_median']} | {v['load_1m']} |"
        )
    if not all("scan_wall" in s[v] for v in variants):
        return lines
    lines += [
        "",
        "Where the time went (medians; Spark's status API: stage wall from submission to completion, the "
        "tasks' summed duration, the longest task; per-task overhead = the scan tasks' deserialization plus "
        "scheduler delay over their count):",
        "",
        "| variant | scan wall (s) | scan task-s | longest scan task (s) | join wall (s) | join task-s "
        "| longest join task (s) | per-task overhead (ms) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for variant in variants:
        v = s[variant]
        lines.append(
            f"| {variant} | {v['scan_wall']} | {v['scan_task_seconds']} | {v['scan_longest_task']} | "
            f"{v['join_wall']} | {v['join_task_seconds']} | {v['join_longest_task']} | "
            f"{v['per_task_overhead_ms']} |"
        )
    return lines


def _goal(s: dict[str, Any], runs: list[dict[str, Any]]) -> list[str]:
    """Whether the balance met the goal (max/median <= 2, faster than the baselines that ran), and whether the
    repetitions show each baseline slower beyond chance."""
    compared = [v for v in VARIANTS if v in s]
    if "balance" not in compared or len(compared) < 2:
        return [""]
    b = s["balance"]
    others = [s[v]["seconds"] for v in compared if v != "balance"]
    goal_spread = max(b["scan_max_over_median"], b["join_max_over_median"]) <= 2
    goal_time = b["seconds"] < min(others)
    # A difference smaller than the run-to-run spread of the variants is not a result on a shared machine.
    noise = max(s[v]["seconds_range"][1] - s[v]["seconds_range"][0] for v in compared)
    within_noise = min(others) - b["seconds"] < noise
    lines = [
        "",
        f"Goal max/median <= 2 with the balance: {'met' if goal_spread else 'missed'} "
        f"(scan {b['scan_max_over_median']}, join {b['join_max_over_median']}). "
        f"Faster than {' and '.join(v for v in compared if v != 'balance')}: {'yes' if goal_time else 'no'} "
        f"({b['seconds']} s against "
        f"{', '.join(f'{x} s' for x in others)}; "
        f"{(1 - b['seconds'] / min(others)) * 100:+.0f}% against the faster of them)"
        + (f", within the run-to-run spread of {noise:.1f} s: no clear difference." if within_noise else "."),
        "",
    ]
    samples = {v: [r["seconds"] for r in runs if r["variant"] == v] for v in compared}
    if min(map(len, samples.values())) < 2:
        return lines
    # The repetitions themselves decide: is each baseline slower than the balance, beyond chance?
    tests = {v: slower_p_value(samples[v], samples["balance"]) for v in compared if v != "balance"}
    shown = all(p < SIGNIFICANCE for p in tests.values())
    return [
        *lines,
        "Each baseline slower than the balance (one-sided exact Mann-Whitney over the repetitions): "
        + ", ".join(f"{v} p = {p:.3g}" for v, p in tests.items())
        + f": {'shown' if shown else 'not shown'} at p < {SIGNIFICANCE}.",
        "",
    ]


if __name__ == "__main__":
    raise SystemExit(main())
