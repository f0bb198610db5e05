"""The XCom contract: a consumer refuses anything but a committed output record, naming both stages."""

from __future__ import annotations

import re
from typing import Any

import pytest

from airflow_provider_finegrained.contract import CONTRACT_VERSION, OutputRecord, StageTrace, UpstreamOutputError

GOOD = {
    "stage": "a",
    "path": "/r/a/try=1",
    "format": "parquet",
    "partition_bytes": [10, 20],
    "rows": 5,
    "committed": True,
    "try_number": 1,
}


def test_round_trip() -> None:
    record = OutputRecord.from_xcom(GOOD, upstream="a", consumer="b")
    assert record.total_bytes == 30
    assert OutputRecord.from_xcom(record.to_xcom(), upstream="a", consumer="b") == record


def test_in_memory_record_from_a_region() -> None:
    record = OutputRecord.from_committed("a", None, 2)
    assert (record.in_memory_only, record.committed, record.partition_bytes) == (True, False, [])


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            None,
            re.escape("stage 'b' reads from 'a', but 'a' published no output (it was skipped, failed, or has not run)"),
        ),
        ("oops", "its XCom 'finegrained_output' is str, not an output record"),
        ({"path": "/x"}, r"its output record lacks \['committed', 'format', 'partition_bytes', 'rows'\]"),
        ({**GOOD, "committed": False}, "its output at /r/a/try=1 was not committed; rerun 'a'"),
        ({**GOOD, "partition_bytes": [1, -2]}, "its partition_bytes \\[1, -2\\] are not a list of byte counts"),
        ({**GOOD, "partition_bytes": "12"}, "are not a list of byte counts"),
        ({**GOOD, "in_memory_only": True}, "'a' handed its output over in memory only"),
    ],
)
def test_bad_upstream_records_are_refused(value: Any, message: str) -> None:
    with pytest.raises(UpstreamOutputError, match=message):
        OutputRecord.from_xcom(value, upstream="a", consumer="b")


def test_trace_ignores_unknown_keys_from_newer_writers() -> None:
    trace = StageTrace(stage="a", region="region-1", slot_sharing_group="region-1", region_leader="a")
    data = {**trace.to_xcom(), "added_later": 1}
    assert StageTrace.from_xcom(data) == trace


def test_stage_trace_is_frozen_and_keeps_its_xcom_shape() -> None:
    import dataclasses

    trace = StageTrace(stage="s", region="r", slot_sharing_group="g", region_leader="s", parallelism=4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        trace.parallelism = 8  # type: ignore[misc]
    value = trace.to_xcom()
    assert value["version"] == CONTRACT_VERSION and value["parallelism"] == 4
    assert set(value) == {"version", *(f.name for f in dataclasses.fields(StageTrace))}
    assert StageTrace.from_xcom(value) == trace


def test_a_committed_record_names_the_folder_of_exactly_the_committed_files() -> None:
    marker = {"path": "s3://lake/fg/d/r/a/try=2", "format": "parquet", "partition_bytes": [7], "rows": 1}
    record = OutputRecord.from_committed("a", {**marker, "attempt": "attempt-1f2e"}, 2)
    assert record.data_path == "s3://lake/fg/d/r/a/try=2/attempt-1f2e"
    assert OutputRecord.from_xcom(record.to_xcom(), upstream="a", consumer="b").data_path == record.data_path
    # Protocol 1 outputs kept their files at the top of the location; so do records written before data_path.
    assert OutputRecord.from_committed("a", marker, 2).data_path == marker["path"]
    assert OutputRecord.from_xcom(GOOD, upstream="a", consumer="b").data_path == GOOD["path"]
