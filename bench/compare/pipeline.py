"""The TPC-H example pipeline as data: each stage's inputs, its pipelined edges and the answers it produces.

Mirrors ``dags_examples/tpch_pipeline.py`` so the spark-submit variants run the same stage functions on
the same inputs; ``tests/bench`` checks the two agree.
"""

from __future__ import annotations

from typing import Final

# stage -> {parameter: "table:<name>" or "stage:<name>"}, in the order the stages run (topological).
STAGE_INPUTS: Final[dict[str, dict[str, str]]] = {
    "lineitem_projected": {"lineitem": "table:lineitem"},
    "q1_pricing_summary": {"lineitem": "stage:lineitem_projected"},
    "customer_orders": {"customer": "table:customer", "orders": "table:orders"},
    "q3_join": {"customer_orders": "stage:customer_orders", "lineitem": "stage:lineitem_projected"},
    "q3_shipping_priority": {"joined": "stage:q3_join"},
    "nation_region": {"nation": "table:nation", "region": "table:region"},
    "q5_join": {
        "lineitem": "stage:lineitem_projected",
        "orders": "table:orders",
        "customer": "table:customer",
        "supplier": "table:supplier",
        "nation_region": "stage:nation_region",
    },
    "q5_local_supplier_volume": {"joined": "stage:q5_join"},
}
STAGES: Final[tuple[str, ...]] = tuple(STAGE_INPUTS)

PIPELINED: Final[frozenset[tuple[str, str]]] = frozenset(
    {("q3_join", "q3_shipping_priority"), ("q5_join", "q5_local_supplier_volume")}
)
"""(producer, consumer) edges the DAG declares pipelined: one region, data handed over in memory."""

ANSWERS: Final[dict[str, tuple[str, tuple[str, ...]]]] = {
    "q1": ("q1_pricing_summary", ("l_returnflag", "l_linestatus")),
    "q3": ("q3_shipping_priority", ("l_orderkey", "o_orderdate", "o_shippriority")),
    "q5": ("q5_local_supplier_volume", ("n_name",)),
}
"""Query -> (the stage whose output is its answer, the key columns compared exactly)."""

DAG_ID: Final = "tpch_pipeline"


def parse_input(ref: str) -> tuple[str, str]:
    """``"table:orders"`` -> ``("table", "orders")``; ``"stage:q3_join"`` -> ``("stage", "q3_join")``."""
    kind, _, name = ref.partition(":")
    if kind not in ("table", "stage") or not name:
        raise ValueError(f"bad input reference {ref!r}: expected table:<name> or stage:<name>")
    return kind, name


def fused_producers(stages: tuple[str, ...] | list[str]) -> set[str]:
    """Producers whose pipelined consumer runs in the same application: not written, handed over lazily."""
    chosen = set(stages)
    return {p for p, c in PIPELINED if p in chosen and c in chosen}
