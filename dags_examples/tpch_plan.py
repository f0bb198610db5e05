"""The TPC-H pipeline's shape, declared for planning: Q1, Q3 and Q5 over the raw tables.

Every exchange kind appears: a pipelined chain (scan -> filter of lineitem), a broadcast of the small
nation/region tables, a forward edge (the Q5 join feeding its aggregate partition by partition) and
blocking joins. ``python -m airflow_provider_finegrained plan dags_examples/tpch_plan.py`` prints
its regions and memory fractions.
"""

from __future__ import annotations

import pendulum
from airflow.sdk import DAG

from airflow_provider_finegrained.dags.declaration import Input
from airflow_provider_finegrained.operators.declared_stage import DeclaredStageOperator as Stage

with DAG(
    dag_id="tpch_plan",
    schedule=None,
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    tags=["finegrained", "example"],
) as dag:
    lineitem = Stage(task_id="scan_lineitem", max_parallelism=64)
    shipped = Stage(
        task_id="filter_shipped",
        inputs={"lineitem": Input(lineitem, mode="pipelined", distribution="forward")},
    )
    q1 = Stage(task_id="q1_pricing_summary", inputs={"lineitem": shipped}, max_parallelism=16)

    orders = Stage(task_id="scan_orders")
    customer = Stage(task_id="scan_customer")
    q3_join = Stage(task_id="q3_join", inputs={"orders": orders, "customer": customer, "lineitem": shipped})
    q3 = Stage(
        task_id="q3_shipping_priority",
        inputs={"joined": Input(q3_join, mode="pipelined", distribution="forward")},
    )

    nation_region = Stage(task_id="scan_nation_region", parallelism=1)
    supplier = Stage(task_id="scan_supplier")
    q5_join = Stage(
        task_id="q5_join",
        inputs={
            "joined": q3_join,
            "supplier": supplier,
            "nation_region": Input(nation_region, distribution="broadcast"),
        },
    )
    q5 = Stage(
        task_id="q5_local_supplier_volume",
        inputs={"joined": Input(q5_join, mode="pipelined", distribution="forward")},
        max_parallelism=8,
    )
