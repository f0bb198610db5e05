"""OpenLineage for stages: dataset naming (a table of cases), the datasets and the decision facet."""

from __future__ import annotations

import json
from typing import Any

import pytest

from airflow_provider_finegrained.operators.lineage import dataset_naming, decision_facet_fields, stage_lineage


@pytest.mark.parametrize(
    ("location", "expected"),
    [
        ("/data/fg/dag/run/a/try=1", ("file", "/data/fg/dag/run/a/try=1")),
        ("/data/fg/orders/", ("file", "/data/fg/orders")),
        ("file:///data/raw/orders.parquet", ("file", "/data/raw/orders.parquet")),
        ("s3://lake/fg/dag/a/try=2", ("s3://lake", "fg/dag/a/try=2")),
        ("s3a://lake/raw/", ("s3://lake", "raw")),  # Hadoop's scheme, named as Spark's listener names it
        ("s3n://lake/raw", ("s3://lake", "raw")),
        ("gs://bucket/x", ("gs://bucket", "x")),
        ("hdfs://nn:8020/warehouse/t", ("hdfs://nn:8020", "warehouse/t")),
        ("abfss://c@acct.dfs.core.windows.net/p", ("abfss://c@acct.dfs.core.windows.net", "p")),
        ("s3://lake", ("s3://lake", "/")),
    ],
)
def test_dataset_naming_follows_openlineage(location: str, expected: tuple[str, str]) -> None:
    assert dataset_naming(location) == expected


TRACE: dict[str, Any] = {
    "stage": "join",
    "region": "region-2",
    "parallelism": 12,
    "decided_parallelism": 11,
    "rule": "bytes / avg_bytes_per_task",
    "executors": 3,
    "executor_cores": 4,
    "executor_memory": 2 << 30,
    "memory_fraction": 0.5,
    "consumed_bytes": {"orders": 1000, "lineitem": 5000},
    "execution": {"mode": "cold"},
    "application_id": "app-1",
}


def test_a_stage_reports_what_it_read_and_wrote_and_how_it_was_sized() -> None:
    upstream = {
        "orders": {"path": "/fg/dag/run/orders/try=1", "committed": True, "in_memory_only": False},
        "handover": {"path": "", "committed": False, "in_memory_only": True},  # in a region: no dataset
    }
    output = {"path": "s3://lake/fg/dag/run/join/try=1", "rows": 42, "total_bytes": 4096, "in_memory_only": False}
    lineage = stage_lineage({"lineitem": "s3a://lake/raw/lineitem"}, upstream, output, TRACE)
    assert [(d.namespace, d.name) for d in lineage.inputs] == [
        ("s3://lake", "raw/lineitem"),
        ("file", "/fg/dag/run/orders/try=1"),
    ]
    (out,) = lineage.outputs
    assert (out.namespace, out.name) == ("s3://lake", "fg/dag/run/join/try=1")
    statistics = out.outputFacets["outputStatistics"]
    assert (statistics.rowCount, statistics.size) == (42, 4096)
    facet = lineage.run_facets["finegrained_decision"]
    from openlineage.client.serde import Serde

    body = json.loads(Serde.to_json(facet))
    assert body["parallelism"] == 12 and body["rule"] == "bytes / avg_bytes_per_task"
    assert body["executors"] == 3 and body["executorMemoryBytes"] == 2 << 30
    assert body["consumedBytes"] == {"orders": 1000, "lineitem": 5000}


def test_a_stage_without_output_or_trace_reports_only_its_inputs() -> None:
    lineage = stage_lineage({"raw": "/raw"}, {}, {"path": "", "in_memory_only": True}, None)
    assert [d.name for d in lineage.inputs] == ["/raw"] and lineage.outputs == [] and lineage.run_facets == {}


def test_the_facet_fields_tolerate_a_trace_with_missing_parts() -> None:
    fields = decision_facet_fields({"stage": "a"})
    assert fields["parallelism"] == 0 and fields["consumedBytes"] == {} and fields["executionMode"] == ""
