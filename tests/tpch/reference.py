"""TPC-H Q1, Q3 and Q5 computed without Spark: pyarrow joins, group-bys and decimal arithmetic.

The answers serve to check ``dags_examples/tpch_queries.py``. Sums are exact (``decimal256``, as wide as the
products need); Q1's averages are exact quotients (``Decimal`` with 28 significant digits), not rounded to
Spark's ``decimal(19, 6)``. ``assert_same_answer`` compares numbers as floats with a relative tolerance and
keys (and the row order) exactly. Answers are ``pyarrow.Table`` s, so pandas is not needed.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

# Exact room for price * (1 - discount) * (1 + tax) over decimal(15, 2) inputs: decimal256(64, 6).
_EXACT = pa.decimal256(20, 2)
_ONE = pa.scalar(1, _EXACT)


def read(tables_dir: str | Path, table: str, columns: Sequence[str]) -> pa.Table:
    """``columns`` of ``<tables_dir>/<table>.parquet``, strings as ``string`` (joins reject ``string_view``)."""
    data = pq.read_table(Path(tables_dir) / f"{table}.parquet", columns=list(columns))
    schema = pa.schema(
        [
            pa.field(f.name, pa.string()) if pa.types.is_string_view(f.type) else pa.field(f.name, f.type)
            for f in data.schema
        ]
    )
    return data.cast(schema)


def _disc_price(t: pa.Table) -> pa.ChunkedArray:
    price = t["l_extendedprice"].cast(_EXACT)
    return pc.multiply(price, pc.subtract(_ONE, t["l_discount"].cast(_EXACT)))


def q1(tables_dir: str | Path) -> pa.Table:
    """Q1 (DELTA 90): pricing summary per (l_returnflag, l_linestatus), ordered by both."""
    li = read(
        tables_dir,
        "lineitem",
        ["l_quantity", "l_extendedprice", "l_discount", "l_tax", "l_returnflag", "l_linestatus", "l_shipdate"],
    )
    li = li.filter(pc.less_equal(li["l_shipdate"], pa.scalar(dt.date(1998, 9, 2))))
    disc_price = _disc_price(li)
    charge = pc.multiply(disc_price, pc.add(_ONE, li["l_tax"].cast(_EXACT)))
    li = li.append_column("disc_price", disc_price).append_column("charge", charge)
    grouped = li.group_by(["l_returnflag", "l_linestatus"]).aggregate(
        [
            ("l_quantity", "sum"),
            ("l_extendedprice", "sum"),
            ("disc_price", "sum"),
            ("charge", "sum"),
            ("l_discount", "sum"),
            ("l_quantity", "count"),
        ]
    )
    rows = []
    for g in grouped.to_pylist():
        n = g["l_quantity_count"]
        rows.append(
            {
                "l_returnflag": g["l_returnflag"],
                "l_linestatus": g["l_linestatus"],
                "sum_qty": g["l_quantity_sum"],
                "sum_base_price": g["l_extendedprice_sum"],
                "sum_disc_price": g["disc_price_sum"],
                "sum_charge": g["charge_sum"],
                "avg_qty": g["l_quantity_sum"] / Decimal(n),
                "avg_price": g["l_extendedprice_sum"] / Decimal(n),
                "avg_disc": g["l_discount_sum"] / Decimal(n),
                "count_order": n,
            }
        )
    rows.sort(key=lambda r: (r["l_returnflag"], r["l_linestatus"]))
    return pa.Table.from_pylist(rows)


def q3(tables_dir: str | Path) -> pa.Table:
    """Q3 (BUILDING, 1995-03-15): top 10 unshipped orders by revenue desc, orderdate asc (orderkey asc on ties)."""
    day = pa.scalar(dt.date(1995, 3, 15))
    cust = read(tables_dir, "customer", ["c_custkey", "c_mktsegment"])
    cust = cust.filter(pc.equal(cust["c_mktsegment"], "BUILDING")).select(["c_custkey"])
    orders = read(tables_dir, "orders", ["o_orderkey", "o_custkey", "o_orderdate", "o_shippriority"])
    orders = orders.filter(pc.less(orders["o_orderdate"], day))
    li = read(tables_dir, "lineitem", ["l_orderkey", "l_extendedprice", "l_discount", "l_shipdate"])
    li = li.filter(pc.greater(li["l_shipdate"], day))
    li = li.append_column("revenue", _disc_price(li))
    co = orders.join(cust, "o_custkey", "c_custkey", join_type="inner")
    joined = li.join(co, "l_orderkey", "o_orderkey", join_type="inner")
    grouped = joined.group_by(["l_orderkey", "o_orderdate", "o_shippriority"]).aggregate([("revenue", "sum")])
    grouped = grouped.rename_columns({"revenue_sum": "revenue"})
    top = grouped.sort_by([("revenue", "descending"), ("o_orderdate", "ascending"), ("l_orderkey", "ascending")])
    return top.slice(0, 10).select(["l_orderkey", "revenue", "o_orderdate", "o_shippriority"])


def q5(tables_dir: str | Path) -> pa.Table:
    """Q5 (ASIA, 1994): revenue per nation of lines whose customer and supplier share that nation, highest first."""
    region = read(tables_dir, "region", ["r_regionkey", "r_name"])
    region = region.filter(pc.equal(region["r_name"], "ASIA"))
    nation = read(tables_dir, "nation", ["n_nationkey", "n_name", "n_regionkey"])
    nation = nation.join(region, "n_regionkey", "r_regionkey", join_type="inner").select(["n_nationkey", "n_name"])
    cust = read(tables_dir, "customer", ["c_custkey", "c_nationkey"])
    cust = cust.join(nation, "c_nationkey", "n_nationkey", join_type="inner")
    orders = read(tables_dir, "orders", ["o_orderkey", "o_custkey", "o_orderdate"])
    in_1994 = pc.and_(
        pc.greater_equal(orders["o_orderdate"], pa.scalar(dt.date(1994, 1, 1))),
        pc.less(orders["o_orderdate"], pa.scalar(dt.date(1995, 1, 1))),
    )
    orders = orders.filter(in_1994).join(cust, "o_custkey", "c_custkey", join_type="inner")
    supp = read(tables_dir, "supplier", ["s_suppkey", "s_nationkey"])
    li = read(tables_dir, "lineitem", ["l_orderkey", "l_suppkey", "l_extendedprice", "l_discount"])
    li = li.append_column("revenue", _disc_price(li))
    joined = li.join(orders, "l_orderkey", "o_orderkey", join_type="inner")
    joined = joined.join(supp, ["l_suppkey", "c_nationkey"], ["s_suppkey", "s_nationkey"], join_type="inner")
    grouped = joined.group_by(["n_name"]).aggregate([("revenue", "sum")]).rename_columns({"revenue_sum": "revenue"})
    return grouped.sort_by([("revenue", "descending")]).select(["n_name", "revenue"])


def records(answer: Any) -> list[dict[str, Any]]:
    """Rows as dicts from a ``pyarrow.Table``, a pandas DataFrame, or Spark ``Row`` s / mappings."""
    if hasattr(answer, "to_pylist"):
        return list(answer.to_pylist())
    if hasattr(answer, "to_dict"):
        return list(answer.to_dict(orient="records"))
    rows: Iterable[Any] = answer
    return [row.asDict() if hasattr(row, "asDict") else dict(row) for row in rows]


def _columns(answer: Any, rows: list[dict[str, Any]]) -> list[str]:
    if hasattr(answer, "column_names"):
        return list(answer.column_names)
    if hasattr(answer, "columns"):
        return [str(c) for c in answer.columns]
    return list(rows[0]) if rows else []


def _is_number(value: object) -> bool:
    return isinstance(value, int | float | Decimal) and not isinstance(value, bool)


def assert_same_answer(
    actual: Any,
    reference: pa.Table | Sequence[Mapping[str, Any]],
    *,
    keys: Sequence[str],
    rtol: float = 1e-9,
    atol: float = 0.0,
    ordered: bool = True,
) -> None:
    """Assert ``actual`` has the columns, rows and values of ``reference``.

    ``keys`` must be equal exactly, row by row when ``ordered`` (the query's ORDER BY), else after sorting
    both sides by ``keys``. Other numbers (Decimal, int, float) are compared as floats within
    ``rtol``/``atol``; anything else exactly.
    """
    got, want = records(actual), records(reference)
    got_cols, want_cols = _columns(actual, got), _columns(reference, want)
    assert got_cols == want_cols, f"columns differ: {got_cols} != {want_cols}"
    assert len(got) == len(want), f"{len(got)} rows, expected {len(want)}"
    if not ordered:
        got = sorted(got, key=lambda r: tuple(r[k] for k in keys))
        want = sorted(want, key=lambda r: tuple(r[k] for k in keys))
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        got_keys, want_keys = tuple(g[k] for k in keys), tuple(w[k] for k in keys)
        assert got_keys == want_keys, f"row {i}: keys {got_keys} != {want_keys}"
        for col in want_cols:
            if col in keys:
                continue
            a, b = g[col], w[col]
            if _is_number(a) and _is_number(b):
                assert math.isclose(float(a), float(b), rel_tol=rtol, abs_tol=atol), (
                    f"row {i} {got_keys}, {col}: {a} != {b} (rtol={rtol}, atol={atol})"
                )
            else:
                assert a == b, f"row {i} {got_keys}, {col}: {a!r} != {b!r}"
