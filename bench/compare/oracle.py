"""The hand-tuned oracle's shuffle partitions per stage and scale, and the sweep that finds them.

The sweep runs the whole pipeline as one application once per candidate partition count (the same count
for every stage), ``repeats`` times, and keeps, per stage, the count whose median stage time was
lowest (ties: the lower count). A pipelined producer runs inside its consumer's query, so it takes its
consumer's count. The result goes to ``bench/results/compare-oracle-sweep.json``; the oracle uses it for
every scale it covers and the table below otherwise.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

from bench.compare.pipeline import PIPELINED, STAGES

SWEEP_CANDIDATES: Final = (1, 2, 4, 8, 16, 32)

# Fallback when a scale has not been swept (the sweep file wins): provisional guesses until a quiet-machine sweep.
# One task per stage at 0.01 (a few MB), the slot count (2) at 0.1, 4 for the joins at 1 (about 345 MB of tables).
HAND_TUNED: Final[dict[str, dict[str, int]]] = {
    "0.01": dict.fromkeys(STAGES, 1),
    "0.1": dict.fromkeys(STAGES, 2),
    "1": {**dict.fromkeys(STAGES, 2), **dict.fromkeys(("q3_join", "q3_shipping_priority"), 4)}
    | dict.fromkeys(("q5_join", "q5_local_supplier_volume"), 4),
}


def scale_key(scale: float) -> str:
    """``0.01`` -> ``"0.01"``, ``1.0`` -> ``"1"``: how scales name keys in tables and files."""
    return f"{scale:g}"


def best_partitions(stage_times: Mapping[int, Mapping[str, Sequence[float]]], fused: bool = True) -> dict[str, int]:
    """Per stage, the candidate whose median time is lowest (``{candidate: {stage: [seconds, ...]}}``).

    ``fused``: the sweep handed pipelined producers over in memory, so each takes its consumer's count."""
    best: dict[str, int] = {}
    for stage in STAGES:
        timed = [(statistics.median(t[stage]), p) for p, t in stage_times.items() if t.get(stage)]
        if timed:
            best[stage] = min(timed)[1]
    # A forward edge has one parallelism, decided by the fused query's time.
    for producer, consumer in PIPELINED if fused else ():
        if consumer in best:
            best[producer] = best[consumer]
    return best


def sweep_entry(times: Mapping[int, Mapping[str, Sequence[float]]], repeats: int, blocking: bool) -> dict[str, Any]:
    """One scale's entry in a sweep file: every sample by candidate, the fastest median per stage, how it was made."""
    ordered = {p: times[p] for p in sorted(times)}
    return {
        "candidates": {str(p): dict(t) for p, t in ordered.items()},
        "best": best_partitions(ordered, fused=not blocking),
        "repeats": repeats,
        "blocking": blocking,
    }


def load_sweep(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def partitions_for(scale: float, sweep_file: Path) -> tuple[dict[str, int], str]:
    """The oracle's partitions at ``scale`` and where they came from (``sweep`` or ``table``)."""
    swept = load_sweep(sweep_file).get(scale_key(scale), {}).get("best")
    if isinstance(swept, dict) and set(swept) == set(STAGES):
        return {k: int(v) for k, v in swept.items()}, "sweep"
    table = HAND_TUNED.get(scale_key(scale))
    if table is None:
        raise KeyError(f"no oracle partitions for scale {scale_key(scale)}: run the sweep (--sweep-oracle) first")
    return dict(table), "table"
