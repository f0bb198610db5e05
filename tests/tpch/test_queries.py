"""The TPC-H stages of ``dags_examples/tpch_queries.py`` against an independent pyarrow computation, at scale 0.01."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import DecimalType

from dags_examples import tpch_data
from dags_examples.tpch_queries import LINEITEM_COLUMNS, STAGES, run_all
from tests.tpch import reference

SCALE = 0.01


@pytest.fixture(scope="session")
def tpch_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tpch")
    tpch_data.generate(SCALE, out)
    return out


@pytest.fixture(scope="module")
def spark() -> Iterator[SparkSession]:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("tpch-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.conf.set("spark.sql.shuffle.partitions", "4")
    yield session
    session.stop()


@pytest.fixture(scope="module")
def outputs(spark: SparkSession, tpch_dir: Path) -> dict[str, DataFrame]:
    tables = {name: spark.read.parquet(str(tpch_dir / f"{name}.parquet")) for name in tpch_data.TABLES}
    return run_all(spark, tables)


@pytest.fixture(scope="module")
def answers(outputs: dict[str, DataFrame]) -> dict[str, pa.Table]:
    names = {"q1": "q1_pricing_summary", "q3": "q3_shipping_priority", "q5": "q5_local_supplier_volume"}
    return {query: outputs[stage].toArrow() for query, stage in names.items()}


@pytest.mark.slow
def test_q1_matches_reference(answers: dict[str, pa.Table], tpch_dir: Path) -> None:
    # Spark's averages are decimal(19, 6), the reference's exact: atol covers that rounding, the sums are exact.
    reference.assert_same_answer(
        answers["q1"], reference.q1(tpch_dir), keys=["l_returnflag", "l_linestatus"], atol=1e-6
    )


@pytest.mark.slow
def test_q3_matches_reference(answers: dict[str, pa.Table], tpch_dir: Path) -> None:
    reference.assert_same_answer(
        answers["q3"], reference.q3(tpch_dir), keys=["l_orderkey", "o_orderdate", "o_shippriority"]
    )


@pytest.mark.slow
def test_q5_matches_reference(answers: dict[str, pa.Table], tpch_dir: Path) -> None:
    reference.assert_same_answer(answers["q5"], reference.q5(tpch_dir), keys=["n_name"])


@pytest.mark.slow
def test_answer_shapes(answers: dict[str, pa.Table]) -> None:
    q1, q3, q5 = answers["q1"], answers["q3"], answers["q5"]
    assert q1.num_rows == 4
    assert [(r["l_returnflag"], r["l_linestatus"]) for r in q1.to_pylist()] == [
        ("A", "F"),
        ("N", "F"),
        ("N", "O"),
        ("R", "F"),
    ]
    assert q1.column_names == [
        "l_returnflag",
        "l_linestatus",
        "sum_qty",
        "sum_base_price",
        "sum_disc_price",
        "sum_charge",
        "avg_qty",
        "avg_price",
        "avg_disc",
        "count_order",
    ]
    assert q3.num_rows == 10
    assert q3.column_names == ["l_orderkey", "revenue", "o_orderdate", "o_shippriority"]
    assert 0 < q5.num_rows <= 5
    assert q5.column_names == ["n_name", "revenue"]
    assert set(q5["n_name"].to_pylist()) <= {"CHINA", "INDIA", "INDONESIA", "JAPAN", "VIETNAM"}


@pytest.mark.slow
def test_stage_schemas(outputs: dict[str, DataFrame]) -> None:
    assert set(outputs) == set(STAGES)
    assert tuple(outputs["lineitem_projected"].columns) == LINEITEM_COLUMNS
    assert outputs["customer_orders"].columns == ["o_orderkey", "o_orderdate", "o_shippriority"]
    assert outputs["q3_join"].columns == ["l_orderkey", "revenue", "o_orderdate", "o_shippriority"]
    assert outputs["nation_region"].columns == ["n_nationkey", "n_name"]
    assert outputs["q5_join"].columns == ["n_name", "revenue"]
    # Money stays decimal: exact sums, no float rounding.
    q1 = outputs["q1_pricing_summary"].schema
    assert q1["sum_qty"].dataType == DecimalType(25, 2)
    assert q1["sum_charge"].dataType == DecimalType(38, 6)
    assert q1["avg_disc"].dataType == DecimalType(19, 6)
    assert isinstance(outputs["q5_local_supplier_volume"].schema["revenue"].dataType, DecimalType)


@pytest.mark.slow
def test_generate_skips_tables_already_there(tpch_dir: Path) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in tpch_dir.glob("*.parquet")}
    paths = tpch_data.generate(SCALE, tpch_dir)
    assert set(paths) == set(tpch_data.TABLES)
    assert {p.name: p.stat().st_mtime_ns for p in tpch_dir.glob("*.parquet")} == before


def test_generate_without_cli_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="pip install tpchgen-cli"):
        tpch_data.generate(SCALE, tmp_path / "out")
