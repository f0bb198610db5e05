"""The TPC-H pipeline's bytes: table sizes per scale factor and each stage's output as a fraction of its input.

Parquet sizes at SF 1 (about 345 MB in all): lineitem 220.9 MiB as the provider's report measured it
(docs/cli.md); the Q5 join read 146.8 MiB, from which lineitem_projected's output fraction follows.
The other fractions are estimates of what each stage keeps (aggregates keep almost nothing); they
only set downstream stages' inputs.
"""

from __future__ import annotations

from typing import Final

from bench.lib.pipeline import PIPELINED, STAGE_INPUTS, parse_input

MiB: Final = 2**20
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

__all__ = ["OUTPUT_FRACTION", "PIPELINED", "STAGE_INPUTS", "STAGE_INPUT_BYTES_SF1", "TABLE_BYTES_SF1", "stage_bytes"]
