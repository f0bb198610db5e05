"""The hand-tuned oracle's shuffle partitions per stage and scale: from the sweep where it covers the scale.

The sweep (``python -m bench compare --sweep-oracle``, :func:`bench.lib.sweep.sweep`) runs the whole pipeline
as one application once per candidate partition count (the same count for every stage), ``repeats`` times,
and keeps, per stage, the count whose median stage time was lowest (ties: the lower count). A pipelined
producer runs inside its consumer's query, so it takes its consumer's count. The result goes to
``bench/results/compare-oracle-sweep.json``; the oracle uses it for every scale it covers and the table below
otherwise.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from bench.lib.pipeline import STAGES, scale_key
from bench.lib.sweep import load_sweep

# Fallback when a scale has not been swept (the sweep file wins): provisional guesses until a quiet-machine sweep.
# One task per stage at 0.01 (a few MB), the slot count (2) at 0.1, 4 for the joins at 1 (about 345 MB of tables).
HAND_TUNED: Final[dict[str, dict[str, int]]] = {
    "0.01": dict.fromkeys(STAGES, 1),
    "0.1": dict.fromkeys(STAGES, 2),
    "1": {**dict.fromkeys(STAGES, 2), **dict.fromkeys(("q3_join", "q3_shipping_priority"), 4)}
    | dict.fromkeys(("q5_join", "q5_local_supplier_volume"), 4),
}


def partitions_for(scale: float, sweep_file: Path) -> tuple[dict[str, int], str]:
    """The oracle's partitions at ``scale`` and where they came from (``sweep`` or ``table``)."""
    swept = load_sweep(sweep_file).get(scale_key(scale), {}).get("best")
    if isinstance(swept, dict) and set(swept) == set(STAGES):
        return {k: int(v) for k, v in swept.items()}, "sweep"
    table = HAND_TUNED.get(scale_key(scale))
    if table is None:
        raise KeyError(f"no oracle partitions for scale {scale_key(scale)}: run the sweep (--sweep-oracle) first")
    return dict(table), "table"
