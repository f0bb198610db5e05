"""The TPC-H pipeline: its stages and their inputs, table sizes per scale factor, each stage's output fraction.

The shape is the simulator's own copy of the TPC-H example DAG's (``dags_examples/tpch_pipeline.py``; the
comparison harness states it too): each stage's inputs and the edges declared pipelined. The DAG declares its
pipelined edges forward and ``nation_region``'s broadcast; here every edge is all-to-all, as the simulator's
results were made. ``tests/bench/test_simulate.py`` checks the stages, inputs and pipelined edges against
the DAG.

Parquet sizes at SF 1 (about 345 MB in all): lineitem 220.9 MiB as the provider's report measured it
(docs/cli.md); the Q5 join read 146.8 MiB, from which lineitem_projected's output fraction follows.
The other fractions are estimates of what each stage keeps (aggregates keep almost nothing); they
only set downstream stages' inputs.
"""

from __future__ import annotations

from typing import Final

MiB: Final = 2**20
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
PIPELINED: Final[frozenset[tuple[str, str]]] = frozenset(
    {("q3_join", "q3_shipping_priority"), ("q5_join", "q5_local_supplier_volume")}
)
"""(producer, consumer) edges the DAG declares pipelined: one region, data handed over in memory."""
TABLE_BYTES_SF1: Final[dict[str, float]] = {
    "lineitem": 220.9 * MiB,
    "orders": 55.0 * MiB,
    "customer": 11.5 * MiB,
    "supplier": 0.75 * MiB,
    "nation": 3e3,
    "region": 1e3,
}
MIN_TABLE_BYTES: Final = 4e3
"""A table is never smaller than one parquet file's footer and row group (SF 0.001 is still a file)."""
OUTPUT_FRACTION: Final[dict[str, float]] = {
    "lineitem_projected": (146.8 - 55.0 - 11.5 - 0.75) * MiB / TABLE_BYTES_SF1["lineitem"],
    "q1_pricing_summary": 1e-5,
    "customer_orders": 0.4,
    "q3_join": 0.05,
    "q3_shipping_priority": 0.01,
    "nation_region": 1.0,
    "q5_join": 0.02,
    "q5_local_supplier_volume": 1e-4,
}


def parse_input(ref: str) -> tuple[str, str]:
    """``"table:orders"`` -> ``("table", "orders")``; ``"stage:q3_join"`` -> ``("stage", "q3_join")``."""
    kind, _, name = ref.partition(":")
    if kind not in ("table", "stage") or not name:
        raise ValueError(f"bad input reference {ref!r}: expected table:<name> or stage:<name>")
    return kind, name


def stage_bytes(scale: float) -> tuple[dict[str, float], dict[str, float]]:
    """Each stage's input and output bytes at ``scale``, in the pipeline's (topological) order."""
    inputs: dict[str, float] = {}
    outputs: dict[str, float] = {}
    for stage, refs in STAGE_INPUTS.items():
        total = 0.0
        for ref in refs.values():
            kind, name = parse_input(ref)
            total += max(MIN_TABLE_BYTES, TABLE_BYTES_SF1[name] * scale) if kind == "table" else outputs[name]
        inputs[stage] = total
        outputs[stage] = total * OUTPUT_FRACTION[stage]
    return inputs, outputs


STAGE_INPUT_BYTES_SF1: Final[dict[str, float]] = stage_bytes(1.0)[0]

__all__ = [
    "OUTPUT_FRACTION",
    "PIPELINED",
    "STAGE_INPUTS",
    "STAGE_INPUT_BYTES_SF1",
    "TABLE_BYTES_SF1",
    "parse_input",
    "stage_bytes",
]
