"""The region job, its status files and traces, and external input sizes, on each kind of storage."""

from __future__ import annotations

import pytest

from airflow_provider_finegrained.execution.measure import ExternalInputError, measure_external
from airflow_provider_finegrained.runtime.job import (
    InputRef,
    RegionJob,
    StageJob,
    StageStatus,
    read_json,
    status_path,
    trace_path,
    write_json,
)
from airflow_provider_finegrained.storage.filesystem import list_folder, write_bytes
from airflow_provider_finegrained.storage.locations import join, region_folder
from tests.storage.conftest import Store


def _job(folder: str, root: str) -> RegionJob:
    stage = StageJob(
        name="b",
        inputs=[InputRef("orders", "committed", path=join(root, "d/r/a/try=1")), InputRef("a", "stage", stage="a")],
        session_conf={"spark.sql.shuffle.partitions": "8"},
        output_location=join(root, "d/r/b/try=1"),
        callable_path=join(folder, "callable-b.pkl"),
        kwargs={"n": 3},
    )
    return RegionJob("region-0", "d", "r", 1, root, folder, [stage])


def test_job_status_and_trace_round_trip(store: Store) -> None:
    folder = region_folder(store.root, "d", "manual__1", "region-0", 1)
    assert folder == join(store.root, "d", "manual__1", "_regions", "region-0", "try=1")
    job = _job(folder, store.root)
    path = job.dump(storage_options=store.options)
    assert path == join(folder, "job.json")
    assert RegionJob.load(path, storage_options=store.options) == job

    status_file = job.status_path("b")
    assert status_file == status_path(folder, "b") == join(folder, "status-b.json")
    assert StageStatus.read(status_file, storage_options=store.options) is None
    status = StageStatus("b", "success", output={"rows": 3}, log=["[finegrained] stage b: finished"])
    status.write(status_file, storage_options=store.options)
    assert StageStatus.read(status_file, storage_options=store.options) == status
    # Written again (a rerun of the region in the same folder): replaced, and no temporary file left.
    StageStatus("b", "failed", error="boom").write(status_file, storage_options=store.options)
    assert StageStatus.read(status_file, storage_options=store.options) == StageStatus("b", "failed", error="boom")

    write_json(trace_path(folder, "b"), {"stage": "b", "parallelism": 4}, storage_options=store.options)
    assert read_json(trace_path(folder, "b"), storage_options=store.options) == {"stage": "b", "parallelism": 4}
    assert [name for name, _ in list_folder(folder, store.options)] == ["job.json", "status-b.json", "trace-b.json"]


def test_missing_job_file_is_an_error(store: Store) -> None:
    with pytest.raises(FileNotFoundError):
        RegionJob.load(join(store.root, "nowhere", "job.json"), storage_options=store.options)


def test_external_inputs_are_measured_through_fsspec(store: Store) -> None:
    data = join(store.root, "external", "orders")
    for name, size in [("b.parquet", 20), ("a.parquet", 10), ("sub/c.parquet", 5), ("_SUCCESS", 0), (".a.crc", 3)]:
        write_bytes(join(data, name), b"x" * size, store.options)
    write_bytes(join(data, "_tmp", "d.parquet"), b"x" * 7, store.options)
    sizes = measure_external(data, "parquet", storage_options=store.options)
    assert sizes.file_bytes == [10, 20, 5] and sizes.path == data and sizes.format == "parquet"
    single = measure_external(join(data, "b.parquet"), "parquet", storage_options=store.options)
    assert single.file_bytes == [20]


def test_external_input_errors_name_the_path(store: Store) -> None:
    missing = join(store.root, "external", "none")
    with pytest.raises(ExternalInputError, match="does not exist") as caught:
        measure_external(missing, "parquet", storage_options=store.options)
    assert missing in str(caught.value)
    hidden_only = join(store.root, "external", "hidden")
    write_bytes(join(hidden_only, "_SUCCESS"), b"", store.options)
    with pytest.raises(ExternalInputError, match="holds no data files"):
        measure_external(hidden_only, "parquet", storage_options=store.options)


def _parquet_bytes(rows: int, row_group_rows: int) -> tuple[bytes, int]:
    """A parquet file of ``rows`` rows in groups of ``row_group_rows``, and its largest group's bytes."""
    import io

    import pyarrow as pa
    import pyarrow.parquet as pq

    sink = io.BytesIO()
    table = pa.table({"k": list(range(rows)), "v": [f"value-{i}" for i in range(rows)]})
    pq.write_table(table, sink, row_group_size=row_group_rows, compression="none")
    data = sink.getvalue()
    meta = pq.ParquetFile(pa.BufferReader(data)).metadata
    groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
    assert len(groups) == -(-rows // row_group_rows)
    return data, max(sum(g.column(j).total_compressed_size for j in range(g.num_columns)) for g in groups)


def test_measure_external_reads_the_largest_row_group_from_parquet_footers(store: Store) -> None:
    # Source tables come from other writers: the scan balance reads their row groups instead of assuming
    # the provider's producers' size (a file of one row group cannot be cut into tasks that all read data).
    data = join(store.root, "external", "table")
    small, small_group = _parquet_bytes(1_000, 1_000)
    large, large_group = _parquet_bytes(20_000, 8_000)
    assert large_group > small_group
    write_bytes(join(data, "part-0.parquet"), small, store.options)
    write_bytes(join(data, "part-1.parquet"), large, store.options)
    sizes = measure_external(data, "parquet", storage_options=store.options)
    assert sizes.file_bytes == [len(small), len(large)]
    assert sizes.row_group_bytes == large_group
    # Not parquet, or not readable: nothing is assumed here (the balance keeps its own assumption).
    write_bytes(join(store.root, "external", "csv", "a.csv"), b"k,v\n1,2\n", store.options)
    assert (
        measure_external(join(store.root, "external", "csv"), "csv", storage_options=store.options).row_group_bytes
        is None
    )
    broken = join(store.root, "external", "broken")
    write_bytes(join(broken, "a.parquet"), b"x" * 20, store.options)
    assert measure_external(broken, "parquet", storage_options=store.options).row_group_bytes is None
