"""The per-task cost model and its fit from the measured runs in bench/results/.

A task occupies one core for ``task_overhead_s + bytes / bytes_per_s`` seconds, plus a spill penalty
for the part of its in-memory data (bytes x ``memory_expansion``) above its memory share. An
application pays ``app_start_s`` (the driver JVM and SparkContext) before it can ask for executors;
an executor is usable ``executor_start_s`` after it is granted.
"""

from __future__ import annotations

import csv
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench.simulate.tpch import PIPELINED, STAGE_INPUT_BYTES_SF1

RESULTS = Path(__file__).resolve().parent.parent / "results"
SHUFFLE_FRACTION = 281 / 1081
"""Shuffle bytes per byte of parquet read (FIELD-NOTES: 1,081 MB of parquet became 281 MB of shuffle)."""


@dataclass(frozen=True)
class CostModel:
    """Seconds a task, an executor and an application cost; see the module docstring."""

    warmup_s: float = 0.8
    """Task CPU the first stage of a fresh application costs once (class loading and JIT in a new
    executor JVM; measured on local[2], one JVM); the simulator adds it to each executor's first task."""
    task_overhead_s: float = 0.015
    bytes_per_s: float = 40e6
    app_start_s: float = 20.0
    executor_start_s: float = 3.0
    memory_expansion: float = 3.0
    app_registered_share: float = 1.0
    """The share of the application's start before it registers (SparkContext up; a static application's
    executors are launched then); the rest is the driver's own start before its first job."""
    driver_stage_s: float = 0.0
    """The driver's own seconds per stage (planning, committing and measuring its output) while the
    application's executors wait; fitted from the warm variant (e) of compare-runs.csv."""
    spill_slowdown: float = 1.0
    """Extra seconds per spilled byte, as a multiple of the seconds to process a byte."""
    fit: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        for name in (
            "warmup_s",
            "task_overhead_s",
            "app_start_s",
            "executor_start_s",
            "spill_slowdown",
            "driver_stage_s",
        ):
            if getattr(self, name) < 0:
                raise ValueError(f"cost model {name} must be >= 0, got {getattr(self, name)!r}")
        if not 0 <= self.app_registered_share <= 1:
            raise ValueError(f"cost model app_registered_share must be in [0, 1], got {self.app_registered_share!r}")
        if self.bytes_per_s <= 0 or self.memory_expansion <= 0:
            raise ValueError(
                f"cost model bytes_per_s and memory_expansion must be > 0, got {self.bytes_per_s!r}, "
                f"{self.memory_expansion!r}"
            )

    def task_seconds(self, task_bytes: float, memory_share: float) -> float:
        """One task's time over ``task_bytes`` with ``memory_share`` bytes of execution memory."""
        seconds = self.task_overhead_s + task_bytes / self.bytes_per_s
        excess = task_bytes * self.memory_expansion - memory_share
        if excess > 0:
            seconds += self.spill_slowdown * excess / self.memory_expansion / self.bytes_per_s
        return seconds

    def spills(self, task_bytes: float, memory_share: float) -> bool:
        """Whether a task over ``task_bytes`` pays :meth:`task_seconds`' spill term."""
        return task_bytes * self.memory_expansion > memory_share

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def least_squares(xs: Sequence[Sequence[float]], ys: Sequence[float]) -> list[float]:
    """Coefficients minimising the sum of ``((coef . x - y) / y)^2``: relative errors, no intercept."""
    n = len(xs[0])
    a = [[0.0] * (n + 1) for _ in range(n)]
    for x, y in zip(xs, ys, strict=True):
        w = 1.0 / (y * y)
        for i in range(n):
            for j in range(n):
                a[i][j] += w * x[i] * x[j]
            a[i][n] += w * x[i] * y
    for col in range(n):  # Gauss-Jordan with partial pivoting on the normal equations
        pivot = max(range(col, n), key=lambda r: abs(a[r][col]))
        if abs(a[pivot][col]) < 1e-300:
            raise ValueError("the cost fit needs points whose tasks, stages and bytes vary independently")
        a[col], a[pivot] = a[pivot], a[col]
        for r in range(n):
            if r != col:
                factor = a[r][col] / a[col][col]
                a[r] = [v - factor * p for v, p in zip(a[r], a[col], strict=True)]
    return [a[i][n] / a[i][i] for i in range(n)]


APP_REGISTERED_SHARE = 8 / 14
"""FIELD-NOTES: a trivial spark-submit takes about 14 s, creating its SparkSession about 8 s of it."""
COLD_VARIANTS = frozenset({"a", "b"})
"""Variants of compare-stages.csv that run every stage in a fresh application (the others share a warm one)."""
FUSED_VARIANTS = frozenset({"e", "oracle"})
"""Variants in which a pipelined producer runs inside its consumer's Spark jobs (its CPU counts there)."""


def _stage_points(results: Path) -> list[tuple[str, float, float, float, float]]:
    """(label, cold, tasks, processed bytes, task CPU s): medians per scale, variant and stage of compare-stages.csv."""
    grouped: dict[tuple[str, str, str], list[tuple[float, float]]] = {}
    with (results / "compare-stages.csv").open() as handle:
        for row in csv.DictReader(handle):
            if row["variant"] not in COLD_VARIANTS | FUSED_VARIANTS:  # (c) repeats (e)'s decisions, cold
                continue
            key = (row["scale"], row["variant"], row["stage"])
            grouped.setdefault(key, []).append((float(row["tasks"]), float(row["task_cpu_s"])))
    producers = {p: c for p, c in PIPELINED}
    consumers = {c: p for p, c in PIPELINED}
    points = []
    for (scale, variant, stage), values in sorted(grouped.items()):
        fused = variant in FUSED_VARIANTS
        if fused and stage in producers:
            continue  # its work is measured in its consumer's row
        tasks = statistics.median(v[0] for v in values)
        cpu = statistics.median(v[1] for v in values)
        read = STAGE_INPUT_BYTES_SF1[stage]
        if fused and stage in consumers:
            producer = consumers[stage]
            read += STAGE_INPUT_BYTES_SF1[producer]
            tasks += statistics.median(v[0] for v in grouped[(scale, variant, producer)])
        processed = read * float(scale) * (1 + SHUFFLE_FRACTION)
        cold = 1.0 if variant in COLD_VARIANTS else 0.0
        points.append((f"SF{scale} {variant} {stage}", cold, tasks, processed, cpu))
    return points


def _app_start(results: Path) -> tuple[float, list[float]]:
    """Seconds per extra application: (fixed + AQE wall - one-application oracle wall) / (apps - 1), per scale."""
    runs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with (results / "compare-runs.csv").open() as handle:
        for row in csv.DictReader(handle):
            if row["ok"] == "True":
                runs.setdefault((row["scale"], row["variant"]), []).append(
                    (float(row["wall_s"]), float(row["applications"]))
                )
    per_scale = []
    for scale in sorted({s for s, _ in runs}):
        if (scale, "b") in runs and (scale, "oracle") in runs:
            b_wall = statistics.median(w for w, _ in runs[(scale, "b")])
            b_apps = statistics.median(a for _, a in runs[(scale, "b")])
            o_wall = statistics.median(w for w, _ in runs[(scale, "oracle")])
            per_scale.append((b_wall - o_wall) / (b_apps - 1))
    if not per_scale:
        raise ValueError(f"{results / 'compare-runs.csv'} holds no (b) and oracle runs to fit the application start")
    return statistics.median(per_scale), per_scale


def _driver_stage(results: Path, stages: int = len(STAGE_INPUT_BYTES_SF1), cores: int = 2) -> tuple[float, list[float]]:
    """Seconds of driver work per stage: the warm variant (e) in its session, less its tasks on ``cores``.

    Variant (e) runs every stage in one warm application on local[2]: its time inside Spark minus task
    CPU / cores is what the driver spends per stage (planning, job scheduling, committing, measuring).
    """
    per_scale: dict[str, list[float]] = {}
    with (results / "compare-runs.csv").open() as handle:
        for row in csv.DictReader(handle):
            if row["variant"] == "e" and row["ok"] == "True":
                inside = float(row["apps_wall_s"]) - float(row["task_cpu_s"]) / cores
                per_scale.setdefault(row["scale"], []).append(inside / stages)
    if not per_scale:
        raise ValueError(f"{results / 'compare-runs.csv'} holds no variant (e) runs to fit the driver's work")
    medians = [statistics.median(v) for _, v in sorted(per_scale.items())]
    return statistics.median(medians), medians


def fit_cost_model(results: Path = RESULTS, executor_start_s: float = 3.0) -> CostModel:
    """Fit task overhead and throughput (relative least squares) and the application start."""
    points = _stage_points(results)
    warmup, overhead, seconds_per_byte = least_squares([p[1:4] for p in points], [p[4] for p in points])
    if min(warmup, overhead, seconds_per_byte) <= 0:
        raise ValueError(f"the cost fit gave a non-positive parameter ({warmup}, {overhead}, {seconds_per_byte})")
    app_start, per_scale = _app_start(results)
    driver_stage, driver_per_scale = _driver_stage(results)

    def errors(group: list[tuple[str, float, float, float, float]]) -> dict[str, float]:
        rel = [abs(warmup * w + overhead * t + seconds_per_byte * b - c) / c for _, w, t, b, c in group]
        return {
            "points": len(rel),
            "median_abs_rel_error": round(statistics.median(rel), 3),
            "p90_abs_rel_error": round(sorted(rel)[math.ceil(0.9 * len(rel)) - 1], 3),
        }

    return CostModel(
        warmup_s=warmup,
        task_overhead_s=overhead,
        bytes_per_s=1 / seconds_per_byte,
        app_start_s=app_start,
        executor_start_s=executor_start_s,
        driver_stage_s=driver_stage,
        app_registered_share=APP_REGISTERED_SHARE,
        fit={
            "task_cpu": (
                "stage task CPU s = warmup_s x (fresh application) + task_overhead_s x tasks"
                " + processed bytes / bytes_per_s, relative least squares"
            ),
            "processed_bytes": f"stage input bytes x (1 + shuffle fraction {SHUFFLE_FRACTION:.3f})",
            "source": (
                "compare-stages.csv: variants a, b (an application per stage), e, oracle (one warm application;"
                " a pipelined pair counted as one stage); medians of repeats"
            ),
            "error_all": errors(points),
            "error_cold": errors([p for p in points if p[1]]),
            "error_warm": errors([p for p in points if not p[1]]),
            "app_start_per_scale_s": [round(v, 2) for v in per_scale],
            "app_start": "median over scales of (fixed+AQE wall - oracle wall) / (applications - 1), compare-runs.csv",
            "executor_start": "assumed (not measured here)",
            "app_registered_share": "FIELD-NOTES: SparkSession created in about 8 s of a 14 s trivial spark-submit",
            "driver_stage_per_scale_s": [round(v, 2) for v in driver_per_scale],
            "driver_stage": "median over scales of (variant e's seconds in Spark - task CPU / 2 cores) / 8 stages,"
            " compare-runs.csv",
        },
    )
