"""A stage's output as an Airflow asset: its URI (a table of cases), the refusals, the event's extra."""

from __future__ import annotations

import pytest

from airflow_provider_finegrained.operators.assets import asset_event_extra, output_asset, output_asset_uri


@pytest.mark.parametrize(
    ("output_path", "uri"),
    [
        ("/data/exports/orders", "file:///data/exports/orders"),
        ("/data/exports/orders/", "file:///data/exports/orders"),
        ("file:///data/exports/orders", "file:///data/exports/orders"),
        ("s3://lake/exports/orders", "s3://lake/exports/orders"),
        ("s3a://lake/exports/orders/", "s3://lake/exports/orders"),
        ("hdfs://nn:8020/warehouse/orders", "hdfs://nn:8020/warehouse/orders"),
        ("gs://bucket/orders", "gs://bucket/orders"),
    ],
)
def test_the_asset_uri_is_the_outputs_storage_uri(output_path: str, uri: str) -> None:
    assert output_asset_uri("orders", output_path) == uri
    assert output_asset("orders", output_path).uri == uri


@pytest.mark.parametrize(
    ("output_path", "match"),
    [
        (None, r"stage 'orders': output_asset=True needs output_path: the default output location changes"),
        ("", "needs output_path"),
        ("/data/{{ ds }}/orders", r"needs a fixed output_path, got the template '/data/\{\{ ds \}\}/orders'"),
    ],
)
def test_an_asset_needs_a_fixed_location(output_path: str | None, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        output_asset_uri("orders", output_path)


def test_the_event_says_what_was_committed() -> None:
    said = {"stage": "orders", "path": "/x", "data_path": "/x/attempt-1", "format": "parquet", "rows": 3}
    said |= {"total_bytes": 10, "try_number": 2}
    record = said | {"partition_bytes": [10], "version": 1, "committed": True}
    assert asset_event_extra(record) == said
