"""TPC-H Q1, Q3 and Q5 as PySpark stages: one function per stage, DataFrame API only.

Each stage is ``name(spark, **inputs) -> DataFrame``; the keyword names are the stage's inputs:

- ``lineitem_projected(lineitem)`` -> ``q1_pricing_summary``, ``q3_join`` and ``q5_join`` (blocking);
- ``customer_orders(customer, orders)`` -> ``q3_join(customer_orders, lineitem)``
  -> ``q3_shipping_priority(joined)`` (pipelined, forward);
- ``nation_region(nation, region)`` -> ``q5_join(lineitem, orders, customer, supplier, nation_region)``
  (broadcast) -> ``q5_local_supplier_volume(joined)`` (pipelined, forward).

``run_all`` chains them in one process (tests); the DAG runs each as its own task.

Substitution parameters are the standard validation ones: Q1 DELTA = 90 days, Q3 segment BUILDING and
date 1995-03-15, Q5 region ASIA and year 1994.

Numbers stay decimal, as tpchgen writes them (``decimal(15, 2)``); Spark's decimal arithmetic is exact here:
``extendedprice * (1 - discount)`` is ``decimal(32, 4)``, times ``(1 + tax)`` ``decimal(38, 6)``, and their sums
``decimal(38, 4)`` / ``decimal(38, 6)``. The only rounding is in Q1's averages, Spark's ``avg`` of a
``decimal(15, 2)``: ``decimal(19, 6)``, rounded half-up to 6 decimal places.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

Q1_SHIPDATE_MAX = dt.date(1998, 9, 2)  # date '1998-12-01' - interval '90' day
Q3_SEGMENT = "BUILDING"
Q3_DATE = dt.date(1995, 3, 15)
Q5_REGION = "ASIA"
Q5_ORDERDATE_FROM = dt.date(1994, 1, 1)
Q5_ORDERDATE_UNTIL = dt.date(1995, 1, 1)  # exclusive

LINEITEM_COLUMNS: tuple[str, ...] = (
    "l_orderkey",
    "l_suppkey",
    "l_quantity",
    "l_extendedprice",
    "l_discount",
    "l_tax",
    "l_returnflag",
    "l_linestatus",
    "l_shipdate",
)


def _disc_price(lineitem: DataFrame) -> Column:
    """``l_extendedprice * (1 - l_discount)``, exact as ``decimal(32, 4)``."""
    return lineitem["l_extendedprice"] * (F.lit(1) - lineitem["l_discount"])


def lineitem_projected(spark: SparkSession, lineitem: DataFrame) -> DataFrame:
    """Source: the lineitem columns Q1, Q3 and Q5 read (``LINEITEM_COLUMNS``), every row."""
    return lineitem.select(*LINEITEM_COLUMNS)


def q1_pricing_summary(spark: SparkSession, lineitem: DataFrame) -> DataFrame:
    """Q1: per (returnflag, linestatus), the sums, averages and row count of lines shipped by 1998-09-02."""
    shipped = lineitem.where(lineitem["l_shipdate"] <= F.lit(Q1_SHIPDATE_MAX))
    disc_price = _disc_price(shipped)
    return (
        shipped.groupBy("l_returnflag", "l_linestatus")
        .agg(
            F.sum("l_quantity").alias("sum_qty"),
            F.sum("l_extendedprice").alias("sum_base_price"),
            F.sum(disc_price).alias("sum_disc_price"),
            F.sum(disc_price * (F.lit(1) + shipped["l_tax"])).alias("sum_charge"),
            F.avg("l_quantity").alias("avg_qty"),
            F.avg("l_extendedprice").alias("avg_price"),
            F.avg("l_discount").alias("avg_disc"),
            F.count(F.lit(1)).alias("count_order"),
        )
        .orderBy("l_returnflag", "l_linestatus")
    )


def customer_orders(spark: SparkSession, customer: DataFrame, orders: DataFrame) -> DataFrame:
    """Q3 source: orders before 1995-03-15 of BUILDING customers -> (o_orderkey, o_orderdate, o_shippriority)."""
    building = customer.where(customer["c_mktsegment"] == Q3_SEGMENT).select("c_custkey")
    early = orders.where(orders["o_orderdate"] < F.lit(Q3_DATE)).select(
        "o_orderkey", "o_custkey", "o_orderdate", "o_shippriority"
    )
    return early.join(building, early["o_custkey"] == building["c_custkey"]).select(
        "o_orderkey", "o_orderdate", "o_shippriority"
    )


def q3_join(spark: SparkSession, customer_orders: DataFrame, lineitem: DataFrame) -> DataFrame:
    """Q3 join: revenue of the lines shipped after 1995-03-15, per order.

    Output: (l_orderkey, revenue, o_orderdate, o_shippriority), one row per order.
    """
    late = lineitem.where(lineitem["l_shipdate"] > F.lit(Q3_DATE))
    joined = late.join(customer_orders, late["l_orderkey"] == customer_orders["o_orderkey"])
    return (
        joined.groupBy("l_orderkey", "o_orderdate", "o_shippriority")
        .agg(F.sum(_disc_price(late)).alias("revenue"))
        .select("l_orderkey", "revenue", "o_orderdate", "o_shippriority")
    )


def q3_shipping_priority(spark: SparkSession, joined: DataFrame) -> DataFrame:
    """Q3 answer: the 10 orders of highest revenue, then earliest date (then lowest orderkey, to break ties)."""
    return joined.orderBy(F.desc("revenue"), F.asc("o_orderdate"), F.asc("l_orderkey")).limit(10)


def nation_region(spark: SparkSession, nation: DataFrame, region: DataFrame) -> DataFrame:
    """Q5 source: the nations of region ASIA -> (n_nationkey, n_name); five rows, broadcast to ``q5_join``."""
    asia = region.where(region["r_name"] == Q5_REGION).select("r_regionkey")
    return nation.join(asia, nation["n_regionkey"] == asia["r_regionkey"]).select("n_nationkey", "n_name")


def q5_join(
    spark: SparkSession,
    lineitem: DataFrame,
    orders: DataFrame,
    customer: DataFrame,
    supplier: DataFrame,
    nation_region: DataFrame,
) -> DataFrame:
    """Q5 join: one (n_name, revenue) row per line of a 1994 order whose customer and supplier share an ASIA nation.

    Not aggregated: ``q5_local_supplier_volume`` sums it, partition by partition before its shuffle.
    """
    nations = F.broadcast(nation_region)
    cust = customer.select("c_custkey", "c_nationkey")
    cust = cust.join(nations, cust["c_nationkey"] == nations["n_nationkey"]).select(
        "c_custkey", "c_nationkey", "n_name"
    )
    in_1994 = (orders["o_orderdate"] >= F.lit(Q5_ORDERDATE_FROM)) & (orders["o_orderdate"] < F.lit(Q5_ORDERDATE_UNTIL))
    ords = orders.where(in_1994).select("o_orderkey", "o_custkey")
    ords = ords.join(cust, ords["o_custkey"] == cust["c_custkey"]).select("o_orderkey", "c_nationkey", "n_name")
    lines = lineitem.select("l_orderkey", "l_suppkey", "l_extendedprice", "l_discount")
    supp = supplier.select("s_suppkey", "s_nationkey")
    joined = lines.join(ords, lines["l_orderkey"] == ords["o_orderkey"])
    joined = joined.join(
        supp, (joined["l_suppkey"] == supp["s_suppkey"]) & (joined["c_nationkey"] == supp["s_nationkey"])
    )
    return joined.select("n_name", _disc_price(joined).alias("revenue"))


def q5_local_supplier_volume(spark: SparkSession, joined: DataFrame) -> DataFrame:
    """Q5 answer: revenue per nation, highest first -> (n_name, revenue)."""
    return joined.groupBy("n_name").agg(F.sum("revenue").alias("revenue")).orderBy(F.desc("revenue"))


STAGES: dict[str, Callable[..., DataFrame]] = {
    "lineitem_projected": lineitem_projected,
    "q1_pricing_summary": q1_pricing_summary,
    "customer_orders": customer_orders,
    "q3_join": q3_join,
    "q3_shipping_priority": q3_shipping_priority,
    "nation_region": nation_region,
    "q5_join": q5_join,
    "q5_local_supplier_volume": q5_local_supplier_volume,
}

REQUIRED_TABLES: tuple[str, ...] = ("lineitem", "orders", "customer", "supplier", "nation", "region")


def run_all(spark: SparkSession, tables: dict[str, DataFrame]) -> dict[str, DataFrame]:
    """Chain every stage in-process over the raw ``tables``; returns each stage's (lazy) output by stage name."""
    missing = [name for name in REQUIRED_TABLES if name not in tables]
    if missing:
        raise KeyError(f"run_all needs the tables {', '.join(missing)}")
    out: dict[str, DataFrame] = {}
    out["lineitem_projected"] = lineitem_projected(spark, lineitem=tables["lineitem"])
    out["q1_pricing_summary"] = q1_pricing_summary(spark, lineitem=out["lineitem_projected"])
    out["customer_orders"] = customer_orders(spark, customer=tables["customer"], orders=tables["orders"])
    out["q3_join"] = q3_join(spark, customer_orders=out["customer_orders"], lineitem=out["lineitem_projected"])
    out["q3_shipping_priority"] = q3_shipping_priority(spark, joined=out["q3_join"])
    out["nation_region"] = nation_region(spark, nation=tables["nation"], region=tables["region"])
    out["q5_join"] = q5_join(
        spark,
        lineitem=out["lineitem_projected"],
        orders=tables["orders"],
        customer=tables["customer"],
        supplier=tables["supplier"],
        nation_region=out["nation_region"],
    )
    out["q5_local_supplier_volume"] = q5_local_supplier_volume(spark, joined=out["q5_join"])
    return out
