"""The JIT's rule from measurements: each region's spark-submit seconds with C1 alone and with tiered, against
the bytes it read per task slot, over the scales ``cold-start --variants jit-c1,jit-tiered`` measured.

``python -m bench cold-start --jit-table [--jit-inputs cold_start_jit_sf0.01,cold_start_jit_sf1,...]``

Reads the results files (nothing runs; files of one scale count as rounds of one measurement), pairs each
region's median seconds under ``jit-c1`` and ``jit-tiered`` at each scale, and finds where C1 alone stops
paying: the largest read per slot up to which no region was slower with C1 (beyond ``tolerance``), and the
smallest at which one was. ``planning/jit.py`` takes its limit from these two. Writes
bench/results/cold_start_jit.json and .md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench.lib.report import write_results
from bench.lib.stats import median

MiB = 2**20


@dataclass(frozen=True)
class RegionPoint:
    """One region at one scale: what it read per slot and its median seconds under each JIT."""

    scale: str
    region: str
    read_per_slot: int
    c1_s: float
    tiered_s: float

    @property
    def c1_over_tiered(self) -> float:
        return self.c1_s / self.tiered_s


@dataclass(frozen=True)
class Boundary:
    """Up to ``c1_holds_to`` bytes per slot no region was slower with C1; from ``c1_loses_from`` one was."""

    c1_holds_to: int | None
    c1_loses_from: int | None
    tolerance: float


def points(scale: str, runs: Sequence[Mapping[str, Any]]) -> list[RegionPoint]:
    """Each region measured under both JITs in ``runs`` (one results file's), median over its rounds."""
    seconds: dict[tuple[str, str], list[float]] = {}
    read: dict[str, int] = {}
    for run in runs:
        if not run.get("ok") or run["variant"] not in ("jit-c1", "jit-tiered"):
            continue
        for leader, region in run["regions"].items():
            if region.get("submit_s") is not None:
                seconds.setdefault((leader, run["variant"]), []).append(region["submit_s"])
                read[leader] = region["read_per_slot"]
    out = []
    for leader in sorted(read, key=read.__getitem__):
        c1, tiered = median(seconds.get((leader, "jit-c1"), [])), median(seconds.get((leader, "jit-tiered"), []))
        if c1 is not None and tiered is not None:
            out.append(RegionPoint(scale, leader, read[leader], round(c1, 2), round(tiered, 2)))
    return out


def boundary(found: Sequence[RegionPoint], tolerance: float = 0.03) -> Boundary:
    """Where C1 alone stops paying: a region is slower with C1 when its seconds exceed tiered's by ``tolerance``."""
    ordered = sorted(found, key=lambda p: p.read_per_slot)
    loses = [p.read_per_slot for p in ordered if p.c1_over_tiered > 1 + tolerance]
    first_loss = loses[0] if loses else None
    holds = [p.read_per_slot for p in ordered if first_loss is None or p.read_per_slot < first_loss]
    return Boundary(holds[-1] if holds else None, first_loss, tolerance)


def markdown(found: Sequence[RegionPoint], edge: Boundary, inputs: Sequence[str]) -> str:
    lines = [
        "# The JIT's rule (python -m bench cold-start --jit-table)",
        "",
        f"From {', '.join(f'bench/results/{name}.json' for name in inputs)}: each region's spark-submit seconds "
        "(median over its rounds) with C1 alone and tiered, by the bytes it read per task slot.",
        "",
        "| scale | region | read per slot | C1 s | tiered s | C1 / tiered |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for p in sorted(found, key=lambda p: p.read_per_slot):
        lines.append(f"| {p.scale} | {p.region} | {p.read_per_slot / MiB:.1f} MiB | {p.c1_s} | {p.tiered_s} | "
                     f"{p.c1_over_tiered:.2f} |")  # fmt: skip
    holds = "none" if edge.c1_holds_to is None else f"{edge.c1_holds_to / MiB:.1f} MiB"
    loses = "no region" if edge.c1_loses_from is None else f"{edge.c1_loses_from / MiB:.1f} MiB"
    lines += ["", f"No region slower with C1 (beyond {edge.tolerance:.0%}) up to {holds} per slot; "
              f"the first slower at {loses}."]  # fmt: skip
    return "\n".join(lines) + "\n"


def table(results: Path, inputs: Sequence[str]) -> dict[str, Any]:
    """Read the inputs' results files, write cold_start_jit.json and .md, and return the document."""
    by_scale: dict[str, list[Mapping[str, Any]]] = {}
    for name in inputs:  # several files of one scale are rounds of one measurement
        doc = json.loads((results / f"{name}.json").read_text())
        by_scale.setdefault(str(doc["scale"]), []).extend(doc["runs"])
    found = [point for scale, runs in by_scale.items() for point in points(scale, runs)]
    edge = boundary(found)
    doc = {"inputs": list(inputs), "points": [asdict(p) for p in found], "boundary": asdict(edge)}
    write_results(results / "cold_start_jit.json", doc, markdown(found, edge, inputs))
    return doc
