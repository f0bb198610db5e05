"""The input balance reaches Spark: a skewed upstream is read in even tasks, as predicted (one local session).

A producer stage writes a skewed output through the region loop (one file about 30x the median, with the
row-group write option its consumer's bytes per task asks for); the consumer stage runs with the settings
``size_region`` decided from the committed file sizes. Read back from Spark: the session's settings inside
the consumer, each scan task's rows (``recordsRead``) from Spark's REST API, and the row groups parquet wrote.
"""

from __future__ import annotations

import json
import random
import statistics
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_finegrained.execution.decision import adaptive_conf, write_options
from airflow_provider_finegrained.planning import ClusterProfile, ParallelismConfig, StageDemand, size_region
from airflow_provider_finegrained.planning.scan_packing import spread
from airflow_provider_finegrained.runtime.output import output_location, read_committed
from airflow_provider_finegrained.storage.locations import join

pytestmark = pytest.mark.slow

MiB = 2**20
FILES = 8
REPEAT = 30  # the first file's rows are repeated this many times: about 30x the median file
PER_FILE = 2_500  # about 0.35 MiB of incompressible rows per small file
BYTES_PER_TASK = 4 * MiB  # the consumer's avg_bytes_per_task: producer row groups of 1 MiB
SCAN_KEYS = ("spark.sql.files.maxPartitionBytes", "spark.sql.files.openCostInBytes")
AQE_KEYS = (
    "spark.sql.adaptive.advisoryPartitionSizeInBytes",
    "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes",
)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from pyspark.sql import SparkSession

    session = SparkSession.builder.master("local[2]").appName("balance-test").getOrCreate()
    try:
        yield session
    finally:
        session.stop()


def skewed(spark: Any) -> Any:
    from pyspark.sql import functions as F

    df = spark.range(0, PER_FILE * FILES, 1, FILES)
    times = F.when(F.spark_partition_id() == 0, F.lit(REPEAT)).otherwise(F.lit(1))
    df = df.select(F.explode(F.sequence(F.lit(1), times)).alias("copy"), "id")
    return df.select(
        (F.col("id") * REPEAT + F.col("copy")).alias("key"),
        F.sha2((F.col("id") * REPEAT + F.col("copy")).cast("string"), 512).alias("payload"),
    )


def consume(spark: Any, rows: Any, record: str) -> Any:
    from pyspark.sql import functions as F

    Path(record).write_text(json.dumps({k: spark.conf.get(k) for k in SCAN_KEYS + AQE_KEYS}))
    # Every column is read, as a real consumer would.
    return rows.groupBy().agg(F.sum(F.length("payload")).alias("chars"), F.sum("key").alias("keys"))


def rest(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as response:
        return json.loads(response.read())


def scan_task_rows(spark: Any, group: str) -> list[int]:
    """recordsRead of every successful task of the group's scan stage, from Spark's REST API.

    Rows, not bytesRead: Spark's bytesRead counts little of a parquet read here (footers), and every row of
    this data set has the same size.
    """
    sc = spark.sparkContext
    base = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
    # The UI's store follows Spark's listener bus: wait until it has the group's jobs, all finished.
    deadline = time.monotonic() + 60
    while True:
        jobs = [j for j in rest(f"{base}/jobs") if j.get("jobGroup") == group]
        if (jobs and all(j["status"] == "SUCCEEDED" for j in jobs)) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    stage_ids = {s for j in jobs for s in j["stageIds"]}
    best: list[int] = []
    for sid in stage_ids:
        for attempt in rest(f"{base}/stages/{sid}"):
            if attempt["status"] != "COMPLETE":
                continue
            tasks = rest(f"{base}/stages/{sid}/{attempt['attemptId']}/taskList?offset=0&length=10000")
            read = [t["taskMetrics"]["inputMetrics"]["recordsRead"] for t in tasks if t["status"] == "SUCCESS"]
            if sum(read) > sum(best):
                best = read
    return best


def test_a_skewed_upstream_is_read_in_even_tasks_as_predicted(spark: Any, tmp_path: Path) -> None:
    import pyarrow.parquet as pq
    from pyspark import cloudpickle

    from airflow_provider_finegrained.runtime.driver import ClassicSessions
    from airflow_provider_finegrained.runtime.job import InputRef, RegionJob, StageJob, StageStatus
    from airflow_provider_finegrained.runtime.region_loop import run_stages

    root, folder = str(tmp_path / "storage"), str(tmp_path / "job")
    Path(folder).mkdir()
    for name, fn in (("producer", skewed), ("consumer", consume)):
        Path(join(folder, f"{name}.pkl")).write_bytes(cloudpickle.dumps(fn))  # type: ignore[no-untyped-call, unused-ignore]
    config = ParallelismConfig(avg_bytes_per_task=BYTES_PER_TASK)
    options = write_options("parquet", [config])
    assert options == {"parquet.block.size": str(MiB)}
    producer = StageJob(
        "producer",
        [],
        {},
        output_location(root, "dag", "run", "producer", 1),
        write_options=options,
        callable_path=join(folder, "producer.pkl"),
    )
    assert run_stages(RegionJob("r0", "dag", "run", 1, root, folder, [producer]), ClassicSessions(spark)) is None
    status = StageStatus.read(join(folder, "status-producer.json"))
    assert status is not None and status.output is not None
    upstream = read_committed(status.output["path"])
    sizes = upstream.partition_bytes
    assert len(sizes) == FILES and max(sizes) >= 20 * statistics.median(sizes)
    big = max(upstream.uris, key=lambda uri: Path(uri).stat().st_size)
    assert pq.ParquetFile(big).num_row_groups >= 5  # the write option reached parquet: the big file can be cut

    parallelism = 4
    profile = ClusterProfile(total_cores=2, total_memory=4 * 2**30, executor_memory=2**30, local=True)
    demand = StageDemand("consumer", parallelism, consumed_bytes=sum(sizes), input_file_bytes=tuple(sizes))
    sizing = size_region([demand], profile).stages["consumer"]
    assert sizing.balance is not None and sizing.input_balance is not None
    # Spark's defaults would read the big file (one task) whole; the balance predicts an even spread.
    assert max(sizing.balance.default_task_bytes) >= max(sizes) and sizing.balance.spread <= 2
    record = tmp_path / "seen.json"
    consumer = StageJob(
        "consumer",
        [InputRef("rows", "committed", path=upstream.path)],
        {**sizing.session_conf(), **adaptive_conf(True, config, sizing.balance)},
        output_location(root, "dag", "run", "consumer", 1),  # written, so the scan runs
        callable_path=join(folder, "consumer.pkl"),
        kwargs={"record": str(record)},
    )
    assert run_stages(RegionJob("r1", "dag", "run", 1, root, folder, [consumer]), ClassicSessions(spark)) is None

    # The session held the balanced scan settings, and AQE sizes from the skewed spread: the big file holds
    # about 30/37 of the bytes, so 4 MiB x 7/37 is below the floor of a quarter: 1 MiB...
    assert json.loads(record.read_text()) == {**sizing.balance.session_conf(), **dict.fromkeys(AQE_KEYS, str(MiB))}
    # ...and Spark cut the files as predicted: as many tasks, and their spread within the prediction's.
    read = scan_task_rows(spark, "consumer")
    assert sum(read) == upstream.rows
    assert len(read) == len(sizing.balance.task_bytes)
    predicted = sorted(b * upstream.rows / sum(sizes) for b in sizing.balance.task_bytes)  # in rows
    assert spread(read) <= 2, (sorted(read), predicted)
    # Row groups land whole and their bytes vary a little: within 25% of the predicted largest task.
    assert abs(max(read) - predicted[-1]) <= 0.25 * predicted[-1], (sorted(read), predicted)


def test_a_source_file_of_one_row_group_is_read_by_one_task_as_its_footer_says(spark: Any, tmp_path: Path) -> None:
    # A source table written elsewhere as one row group (about 2 MiB, as TPC-H SF 0.01's lineitem), 1 MiB
    # per task: the provider's producers' 1 MiB row groups assumed, the balance predicts two tasks of data
    # and Spark runs two, one reading nothing; read from the footer, one task.
    import pyarrow as pa
    import pyarrow.parquet as pq

    from airflow_provider_finegrained.execution.measure import measure_external

    path = tmp_path / "source" / "table.parquet"
    path.parent.mkdir()
    rows = 12_000
    payload = pa.array([random.randbytes(160) for _ in range(rows)], pa.binary())  # incompressible
    pq.write_table(pa.table({"payload": payload}), path, row_group_size=rows, compression="none")
    measured = measure_external(str(path.parent), "parquet")
    assert measured.row_group_bytes is not None and len(measured.file_bytes) == 1
    assert MiB < measured.file_bytes[0] < 2 * measured.row_group_bytes  # one row group

    profile = ClusterProfile(total_cores=2, total_memory=4 * 2**30, executor_memory=2**30, local=True)
    seen: dict[str, list[int]] = {}
    for label, groups in (("assumed", None), ("footer", measured.row_group_bytes)):
        demand = StageDemand(
            "scan",
            2,
            consumed_bytes=sum(measured.file_bytes),
            input_file_bytes=tuple(measured.file_bytes),
            input_row_group_bytes=groups,
        )
        balance = size_region([demand], profile).stages["scan"].balance
        assert balance is not None
        for key, value in balance.session_conf().items():
            spark.conf.set(key, value)
        spark.sparkContext.setJobGroup(f"source-{label}", label)
        assert spark.read.parquet(str(path)).selectExpr("count(payload)").collect()[0][0] == rows
        seen[label] = scan_task_rows(spark, f"source-{label}")
        # Spark cut the file as predicted: as many tasks, and the empty ones where the prediction has them.
        assert len(seen[label]) == len(balance.task_bytes), (label, seen[label], balance.task_bytes)
    assert sorted(seen["assumed"]) == [0, rows]
    assert seen["footer"] == [rows]
