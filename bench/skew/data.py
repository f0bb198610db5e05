"""The skew experiment's data: a fact table with Zipf join keys, a dimension, and the consumer stage over them.

The fact table is written as a producer partitioned by the key writes it: ``FILES`` parquet files (Spark's
default shuffle partitions), so the hot key's rows are one file many times the median file.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path
from typing import Any

from bench.lib.session import file_sizes
from bench.skew.settings import ROW_GROUP_VARIANTS, producer_options

FILES = 200
ZIPF_S = 1.2
KEYS = 50_000
DIM_FILES = 4


def hot_key_share(zipf_s: float) -> float:
    """P(key = 1) of the generator below: floor((1 - u) ** (-1 / (s - 1))) is 1 for u < 1 - 2^-(s-1)."""
    return float(1 - 2 ** -(zipf_s - 1))


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


def consumer(spark: Any, fact: Path, dim: Path, out: Path) -> None:
    from pyspark.sql import functions as F

    f = spark.read.parquet(str(fact)).select("key", "value", F.length("payload").alias("plen"))
    d = spark.read.parquet(str(dim))
    joined = f.join(d, "key")
    result = joined.groupBy("grp").agg(F.sum("value").alias("v"), F.sum("plen").alias("p"), F.count("*").alias("n"))
    result.write.mode("overwrite").parquet(str(out))
