"""Benchmark: which default ``avg_bytes_per_task`` suits Spark consumer stages on this machine.

The provider sizes each Spark stage FLIP-187 style::

    p = clamp(ceil(input_bytes / avg_bytes_per_task), min, max)

where ``input_bytes`` is the sum of the upstream stages' parquet part files on disk, and ``p`` becomes the
consumer stage's ``spark.sql.shuffle.partitions`` (``avg_bytes_per_task`` also becomes
``spark.sql.files.maxPartitionBytes`` for source scans).

This script generates synthetic parquet data with Spark itself (a fact table with a group key of moderate
cardinality, numeric and string columns, and a small dimension table) at two sizes, then times one typical
consumer stage (sort-merge join of fact with dim, group-by aggregation, parquet write) for every
``avg_bytes_per_task`` in {4, 8, 16, 32, 64, 128, 256} MiB plus Spark's defaults (200 shuffle partitions,
128 MiB max partition bytes) as a baseline. Everything runs in ONE ``local[2]`` SparkSession with AQE off,
so the partition count is exactly what we set; broadcast joins are disabled so the join really shuffles.
Each setting is repeated (interleaved order across repeats) and the median wall time is reported, together
with the median CPU time of the Spark JVM (from /proc), which stays meaningful when the CPU is shared.

Usage::

    /work/main/.venv/bin/python bench/bytes_per_task.py [--quick]
    /work/main/.venv/bin/python bench/bytes_per_task.py --rerender bench/results/bytes_per_task.json

Results go to ``bench/results/bytes_per_task.{json,md}`` (``bytes_per_task_quick.*`` with ``--quick``).
Generated data and outputs live in a temp dir that is deleted at the end.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import shlex
import shutil
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
AVG_BYTES_PER_TASK_MIB: tuple[int, ...] = (4, 8, 16, 32, 64, 128, 256)
BASELINE = "spark-default"
SPARK_DEFAULT_SHUFFLE_PARTITIONS = 200
SPARK_DEFAULT_MAX_PARTITION_BYTES = 128 * MIB

# Synthetic data shape.
GROUP_KEYS = 100_000  # moderate cardinality group key
DIM_ROWS = 10_000  # small dimension table (joined by a shuffle join, not broadcast)
REGIONS = ("north", "south", "east", "west", "central", "emea", "apac", "latam")
STATUSES = ("new", "paid", "shipped", "returned", "cancelled")
ROW_GROUP_BYTES = 4 * MIB  # small row groups so that every scan split size is honoured
TARGET_FILE_BYTES = 32 * MIB  # upstream part-file size
CALIBRATION_ROWS = 1_000_000
# Medians of JVM CPU time within this fraction of the lowest count as ties (wall time on a shared CPU is too
# noisy to rank by; CPU time is what extra tasks cost, whatever else runs on the machine).
NOISE_BAND = 0.10

Ratios = dict[str, float]
RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclass
class SettingResult:
    """Timings for one (size, setting) pair."""

    setting: str
    avg_bytes_per_task: int
    shuffle_partitions: int
    max_partition_bytes: int
    scan_splits: int
    times_s: list[float] = field(default_factory=list)
    loadavg_1m: list[float] = field(default_factory=list)
    median_s: float = 0.0
    jvm_cpu_s: list[float] = field(default_factory=list)
    median_jvm_cpu_s: float = 0.0
    output_files: int = 0
    output_bytes: int = 0


@dataclass
class SizeResult:
    """All settings for one generated data size."""

    label: str
    target_bytes: int
    fact_rows: int
    fact_files: int
    fact_bytes: int
    dim_bytes: int
    input_bytes: int
    settings: list[SettingResult] = field(default_factory=list)


def parquet_bytes(path: Path) -> tuple[int, int]:
    """Return (number of part files, total bytes) of the parquet part files under ``path``."""
    files = [p for p in path.rglob("part-*") if p.is_file() and p.name.endswith(".parquet")]
    return len(files), sum(p.stat().st_size for p in files)


def memory_bytes() -> int:
    """Total physical memory from /proc/meminfo (0 if unavailable)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def jvm_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of the Spark JVM so far (robust to CPU contention, unlike wall time)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def build_session(tmp: Path) -> Any:
    """One local[2] session for the whole run; AQE and broadcast joins off."""
    from pyspark.sql import SparkSession

    return (
        SparkSession.builder.master("local[2]")
        .appName("bytes_per_task_bench")
        .config("spark.driver.memory", "4g")
        .config("spark.local.dir", str(tmp / "spark-local"))
        .config("spark.sql.warehouse.dir", str(tmp / "warehouse"))
        .config("spark.sql.adaptive.enabled", "false")
        .config("spark.sql.autoBroadcastJoinThreshold", "-1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )


def write_fact(spark: Any, path: Path, rows: int, files: int) -> None:
    """Deterministic synthetic fact table (hash-derived columns, no RNG state)."""
    from pyspark.sql import functions as F

    ident = F.col("id")
    statuses = F.array(*[F.lit(s) for s in STATUSES])
    status_idx = (F.pmod(F.xxhash64(ident, F.lit(5)), F.lit(len(STATUSES))) + 1).cast("int")
    df = spark.range(0, rows, 1, files).select(
        F.pmod(F.xxhash64(ident, F.lit(1)), F.lit(GROUP_KEYS)).alias("grp_key"),
        F.pmod(F.xxhash64(ident, F.lit(2)), F.lit(DIM_ROWS)).alias("dim_key"),
        (F.pmod(F.xxhash64(ident, F.lit(3)), F.lit(1_000_000)) / F.lit(100.0)).alias("amount"),
        F.pmod(F.xxhash64(ident, F.lit(4)), F.lit(100)).cast("int").alias("qty"),
        F.element_at(statuses, status_idx).alias("status"),
        F.substring(F.sha2(ident.cast("string"), 256), 1, 16).alias("note"),
        F.sha2(F.concat(F.lit("p"), ident.cast("string")), 256).alias("payload"),
    )
    df.write.mode("overwrite").option("parquet.block.size", ROW_GROUP_BYTES).parquet(str(path))


def write_dim(spark: Any, path: Path) -> None:
    """Small dimension table keyed by ``dim_key``."""
    from pyspark.sql import functions as F

    ident = F.col("id")
    regions = F.array(*[F.lit(r) for r in REGIONS])
    df = spark.range(0, DIM_ROWS, 1, 1).select(
        ident.alias("dim_key"),
        F.element_at(regions, (F.pmod(ident, F.lit(len(REGIONS))) + 1).cast("int")).alias("region"),
        (F.lit(0.5) + F.pmod(F.xxhash64(ident, F.lit(7)), F.lit(1000)) / F.lit(1000.0)).alias("weight"),
        F.concat(F.lit("item-"), ident.cast("string")).alias("name"),
    )
    df.write.mode("overwrite").parquet(str(path))


def consumer_stage(spark: Any, fact: Path, dim: Path, out: Path) -> None:
    """The typical consumer stage: shuffle join fact x dim, group-by aggregation, parquet write."""
    from pyspark.sql import functions as F

    f = spark.read.parquet(str(fact))
    d = spark.read.parquet(str(dim))
    agg = (
        f.join(d, "dim_key")
        .groupBy("grp_key", "region")
        .agg(
            F.sum(F.col("amount") * F.col("weight")).alias("revenue"),
            F.count(F.lit(1)).alias("n"),
            F.avg("qty").alias("avg_qty"),
            F.sum(F.length("payload") + F.length("note")).alias("text_chars"),
            F.max("amount").alias("max_amount"),
            F.sum(F.when(F.col("status") == "returned", 1).otherwise(0)).alias("returns"),
        )
    )
    agg.write.mode("overwrite").parquet(str(out))


def apply_setting(spark: Any, s: SettingResult) -> None:
    spark.conf.set("spark.sql.shuffle.partitions", str(s.shuffle_partitions))
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(s.max_partition_bytes))


def make_settings(input_bytes: int) -> list[SettingResult]:
    settings = [
        SettingResult(
            setting=f"{mib} MiB",
            avg_bytes_per_task=mib * MIB,
            shuffle_partitions=max(1, math.ceil(input_bytes / (mib * MIB))),
            max_partition_bytes=mib * MIB,
            scan_splits=0,
        )
        for mib in AVG_BYTES_PER_TASK_MIB
    ]
    settings.append(
        SettingResult(
            setting=BASELINE,
            avg_bytes_per_task=0,
            shuffle_partitions=SPARK_DEFAULT_SHUFFLE_PARTITIONS,
            max_partition_bytes=SPARK_DEFAULT_MAX_PARTITION_BYTES,
            scan_splits=0,
        )
    )
    return settings


def run_order(n: int, rep: int) -> list[int]:
    """Interleave: ascending, descending, then a rotation, to spread drift across settings."""
    idx = list(range(n))
    if rep % 3 == 1:
        return idx[::-1]
    if rep % 3 == 2:
        shift = n // 2
        return idx[shift:] + idx[:shift]
    return idx


def generate(spark: Any, tmp: Path, label: str, target_bytes: int, bytes_per_row: float) -> SizeResult:
    rows = max(10_000, round(target_bytes / bytes_per_row))
    files = max(2, round(target_bytes / TARGET_FILE_BYTES))
    fact = tmp / label / "fact"
    dim = tmp / label / "dim"
    t0 = time.perf_counter()
    write_fact(spark, fact, rows, files)
    write_dim(spark, dim)
    n_files, fact_bytes = parquet_bytes(fact)
    _, dim_bytes = parquet_bytes(dim)
    print(
        f"[gen] {label}: {rows:,} rows, {n_files} files, fact {fact_bytes / MIB:.1f} MiB, "
        f"dim {dim_bytes / 1024:.0f} KiB in {time.perf_counter() - t0:.1f}s",
        flush=True,
    )
    return SizeResult(
        label=label,
        target_bytes=target_bytes,
        fact_rows=rows,
        fact_files=n_files,
        fact_bytes=fact_bytes,
        dim_bytes=dim_bytes,
        input_bytes=fact_bytes + dim_bytes,
    )


def bench_size(spark: Any, tmp: Path, size: SizeResult, reps: int, jvm_pid: int) -> None:
    fact = tmp / size.label / "fact"
    dim = tmp / size.label / "dim"
    out = tmp / size.label / "out"
    size.settings = make_settings(size.input_bytes)
    for s in size.settings:
        apply_setting(spark, s)
        s.scan_splits = spark.read.parquet(str(fact)).rdd.getNumPartitions()
    # Untimed warm-up (JIT, page cache) with a mid-range setting.
    apply_setting(spark, size.settings[len(AVG_BYTES_PER_TASK_MIB) // 2])
    consumer_stage(spark, fact, dim, out)
    for rep in range(reps):
        for i in run_order(len(size.settings), rep):
            s = size.settings[i]
            apply_setting(spark, s)
            s.loadavg_1m.append(round(os.getloadavg()[0], 2))
            c0 = jvm_cpu_seconds(jvm_pid)
            t0 = time.perf_counter()
            consumer_stage(spark, fact, dim, out)
            elapsed = time.perf_counter() - t0
            cpu = jvm_cpu_seconds(jvm_pid) - c0
            s.times_s.append(round(elapsed, 3))
            s.jvm_cpu_s.append(round(cpu, 2))
            s.output_files, s.output_bytes = parquet_bytes(out)
            print(
                f"[run] {size.label} rep {rep + 1}/{reps} {s.setting:>13} p={s.shuffle_partitions:<4} "
                f"splits={s.scan_splits:<4} {elapsed:7.2f}s  cpu {cpu:7.2f}s  (load {s.loadavg_1m[-1]:.1f})",
                flush=True,
            )
    for s in size.settings:
        s.median_s = round(statistics.median(s.times_s), 3)
        s.median_jvm_cpu_s = round(statistics.median(s.jvm_cpu_s), 2)


def _worst_ratio(sizes: list[SizeResult], metric: str) -> Ratios:
    """Per avg_bytes_per_task: the worst (largest) ratio of its median ``metric`` to the best, over sizes."""
    worst: Ratios = {}
    for mib in AVG_BYTES_PER_TASK_MIB:
        ratios = []
        for size in sizes:
            tuned = [s for s in size.settings if s.setting != BASELINE]
            best = min(float(getattr(s, metric)) for s in tuned)
            this = next(s for s in tuned if s.avg_bytes_per_task == mib * MIB)
            ratios.append(float(getattr(this, metric)) / best)
        worst[f"{mib} MiB"] = round(max(ratios), 3)
    return worst


def summarize(sizes: list[SizeResult]) -> dict[str, Any]:
    """Worst ratios to the best (wall and JVM CPU) and the settings tied with the lowest CPU at every size."""
    worst_cpu = _worst_ratio(sizes, "median_jvm_cpu_s")
    tied = [mib for mib in AVG_BYTES_PER_TASK_MIB if worst_cpu[f"{mib} MiB"] <= 1 + NOISE_BAND]
    return {
        "noise_band": NOISE_BAND,
        "worst_wall_ratio": _worst_ratio(sizes, "median_s"),
        "worst_jvm_cpu_ratio": worst_cpu,
        "tied_on_jvm_cpu_mib": tied,
        "largest_tied_mib": max(tied) if tied else None,
    }


def render_markdown(meta: dict[str, Any], sizes: list[SizeResult], summary: dict[str, Any]) -> str:
    lines = [
        "# avg_bytes_per_task benchmark (Spark consumer stage)",
        "",
        f"Command: `{meta['command']}`",
        "",
        f"Machine: {meta['nproc']} cores, {meta['memory_bytes'] / 2**30:.1f} GiB RAM, "
        f"Python {meta['python']}, "
        f"PySpark {meta['pyspark']}, Java {meta['java']}, {meta['date']}. "
        f"local[2], driver memory 4g, AQE off, broadcast joins off, {meta['reps']} repeats (median).",
        f"1-min load average during runs: {meta['loadavg_1m_min']:.1f}-{meta['loadavg_1m_max']:.1f} "
        "(shared CPU; above 2 means contention).",
        "",
        "Stage: read fact + dim, sort-merge join on dim_key, group by (grp_key, region), write parquet.",
        "p = max(1, ceil(input_bytes / avg_bytes_per_task)) -> spark.sql.shuffle.partitions; "
        "avg_bytes_per_task -> spark.sql.files.maxPartitionBytes.",
        "",
    ]
    for size in sizes:
        tuned = [s for s in size.settings if s.setting != BASELINE]
        best = min(s.median_s for s in tuned)
        best_cpu = min(s.median_jvm_cpu_s for s in tuned)
        lines += [
            f"## {size.label}: input {size.input_bytes / MIB:.1f} MiB on disk "
            f"({size.fact_rows:,} fact rows, {size.fact_files} files)",
            "",
            "| avg_bytes_per_task | p | scan splits | out files | wall runs (s) | wall median (s) "
            "| wall vs best | JVM CPU median (s) | CPU vs best |",
            "|---|---:|---:|---:|---|---:|---:|---:|---:|",
        ]
        for s in size.settings:
            runs = ", ".join(f"{t:.2f}" for t in s.times_s)
            lines.append(
                f"| {s.setting} | {s.shuffle_partitions} | {s.scan_splits} | {s.output_files} | {runs} "
                f"| {s.median_s:.2f} | {s.median_s / best:.2f}x "
                f"| {s.median_jvm_cpu_s:.1f} | {s.median_jvm_cpu_s / best_cpu:.2f}x |"
            )
        lines.append("")
    tied = summary["tied_on_jvm_cpu_mib"]
    lines += [
        "Worst ratio to the best median over both sizes (tuned settings only):",
        "",
        "- wall: " + ", ".join(f"{k} {v:.2f}x" for k, v in summary["worst_wall_ratio"].items()),
        "- JVM CPU: " + ", ".join(f"{k} {v:.2f}x" for k, v in summary["worst_jvm_cpu_ratio"].items()),
        "",
        f"Within {summary['noise_band']:.0%} of the lowest JVM CPU at every size: "
        + (", ".join(f"{m} MiB" for m in tied) if tied else "none"),
        "",
    ]
    return "\n".join(lines)


def write_results(result: dict[str, Any], sizes: list[SizeResult], suffix: str) -> None:
    md = render_markdown(result["meta"], sizes, result["summary"])
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    (RESULTS_DIR / f"bytes_per_task{suffix}.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS_DIR / f"bytes_per_task{suffix}.md").write_text(md)
    print(md)


def rerender(path: Path) -> int:
    """Recompute the summary and markdown from a saved JSON (no Spark, no re-measurement)."""
    result = json.loads(path.read_text())
    sizes = [
        SizeResult(
            **{k: v for k, v in raw.items() if k != "settings"},
            settings=[SettingResult(**st) for st in raw["settings"]],
        )
        for raw in result["sizes"]
    ]
    result = {"meta": result["meta"], "sizes": result["sizes"], "summary": summarize(sizes)}
    write_results(result, sizes, "_quick" if path.stem.endswith("_quick") else "")
    return 0


def _raise_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="4 and 16 MiB, 1 repeat (smoke run)")
    parser.add_argument(
        "--sizes-mb",
        type=int,
        nargs=2,
        metavar=("SMALL", "LARGE"),
        help="override target sizes (MiB on disk)",
    )
    parser.add_argument("--reps", type=int, help="override repeats per setting (default 3, quick 1)")
    parser.add_argument(
        "--rerender", type=Path, metavar="JSON", help="only recompute summary + markdown from saved results"
    )
    args = parser.parse_args(argv)
    if args.rerender:
        return rerender(args.rerender)

    signal.signal(signal.SIGTERM, _raise_on_sigterm)  # so the temp dir is removed on kill
    os.environ["SPARK_LOCAL_IP"] = "127.0.0.1"
    small_mb, large_mb = args.sizes_mb or ((4, 16) if args.quick else (50, 400))
    sizes_target = [("small", small_mb * MIB), ("large", large_mb * MIB)]
    reps = args.reps or (1 if args.quick else 3)
    suffix = "_quick" if args.quick else ""

    tmp = Path(tempfile.mkdtemp(prefix="bytes_per_task_"))
    spark = None
    t_start = time.perf_counter()
    try:
        import pyspark

        spark = build_session(tmp)
        spark.sparkContext.setLogLevel("ERROR")
        jvm = spark.sparkContext._jvm
        java_version = str(jvm.System.getProperty("java.version"))
        jvm_pid = int(jvm.java.lang.ProcessHandle.current().pid())

        # Calibrate bytes per row so that the generated sizes land near the targets.
        calib = tmp / "calib"
        write_fact(spark, calib, CALIBRATION_ROWS, 2)
        bytes_per_row = parquet_bytes(calib)[1] / CALIBRATION_ROWS
        shutil.rmtree(calib, ignore_errors=True)
        print(f"[gen] calibration: {bytes_per_row:.2f} parquet bytes/row", flush=True)

        sizes = [generate(spark, tmp, label, target, bytes_per_row) for label, target in sizes_target]
        for size in sizes:
            bench_size(spark, tmp, size, reps, jvm_pid)

        summary = summarize(sizes)
        loads = [x for size in sizes for st in size.settings for x in st.loadavg_1m]
        meta: dict[str, Any] = {
            "command": shlex.join([sys.executable, *sys.argv]),
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            "nproc": os.cpu_count(),
            "memory_bytes": memory_bytes(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "pyspark": pyspark.__version__,
            "java": java_version,
            "master": "local[2]",
            "driver_memory": "4g",
            "aqe": False,
            "broadcast_join": False,
            "reps": reps,
            "row_group_bytes": ROW_GROUP_BYTES,
            "group_keys": GROUP_KEYS,
            "dim_rows": DIM_ROWS,
            "total_wall_s": round(time.perf_counter() - t_start, 1),
            "loadavg_1m_min": min(loads),
            "loadavg_1m_max": max(loads),
        }
        result = {
            "meta": meta,
            "sizes": [asdict(s) for s in sizes],
            "summary": summary,
        }
        write_results(result, sizes, suffix)
    finally:
        if spark is not None:
            spark.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
