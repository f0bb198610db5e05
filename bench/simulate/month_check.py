"""The month's measured runs against the simulator: does the month's replay rest on costs that match what ran?

Each line of ``bench/results/month.jsonl`` (``python -m bench month``) is one TPC-H DAG run at its day's scale
on the loopback YARN: 2 NodeManagers of 4 vcores and 6 GiB, executors of 1 core and 1 GiB, the other
tenant's one executor beside it, everything on 2 physical cores. Here each successful run is simulated alone on
that cluster with the loopback model (:mod:`bench.simulate.loopback`), under the policy it ran:

- the model's background load, a fresh executor's first-task warm-up and the driver's CPU per job are fitted
  to the dynamic-allocation runs (as :func:`bench.simulate.scenarios.validate` fits item 2's), over a grid;
- the hand-sized and the provider's runs are held out.

Compared per run: Airflow's wall time with the simulated makespan, the executors' core-seconds (from the event
logs) with the simulated added core-seconds, used core-seconds with used. YARN's own vcore-seconds also count
ApplicationMasters and containers before their executors register, which the simulator does not model, so
they are not compared.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from itertools import product
from pathlib import Path
from typing import Any, Final

from bench.simulate.cluster import ClusterSpec
from bench.simulate.costs import CostModel
from bench.simulate.loopback import LoopbackModel
from bench.simulate.month import hand_policy, repo_path
from bench.simulate.policies import PolicySpec
from bench.simulate.scenarios import release_policy
from bench.simulate.sim import Simulation
from bench.simulate.workload import tpch_run

LOOPBACK_YARN: Final = ClusterSpec(2, 4, 6 * 2**30, 1, 2**30)
"""bench/month/__main__.py's defaults: ``--nodes 2 --cores 4 --memory-mb 6144``, executors of 1 core, 1 GiB."""
TENANT_PLACES: Final = 1
"""The other tenant's executors (bench/month/cluster.py's ``Tenant.cores``), held all day."""
FIGURES: Final = {"wall_s": "makespan_s", "executor_core_s": "added_core_s", "used_core_s": "used_core_s"}
"""Each measured figure of a month line and its simulated counterpart."""
FIT_ON: Final = "dynamic"
TOLERANCE: Final = 0.20
"""A policy's figure agrees when the median over its runs of simulated / measured is within 20% of 1."""
GRID: Final = {
    "background_load": tuple(float(i) for i in range(0, 9)),
    "executor_warmup_cpu_s": tuple(float(i) for i in range(0, 21, 2)),
    "driver_job_cpu_s": (0.0, 0.5, 1.0, 2.0, 4.0),
}
"""What the fit tries: 9 x 11 x 5 models, each simulating every dynamic run (a few ms each)."""


@dataclass(frozen=True)
class MeasuredRun:
    """One successful (policy, day) run of the month, the figures compared."""

    policy: str
    date: str
    scale: float
    wall_s: float
    executor_core_s: float
    used_core_s: float


def read_runs(path: Path) -> list[MeasuredRun]:
    """The successful runs in ``path`` (a failed run's figures stop where it failed), in the file's order."""
    if not path.is_file():
        return []
    out = []
    for text in path.read_text().splitlines():
        line = json.loads(text) if text.strip() else {}
        if line.get("state") == "success":
            out.append(
                MeasuredRun(
                    line["policy"],
                    line["date"],
                    float(line["scale"]),
                    float(line["wall_s"]),
                    float(line["executor_core_s"]),
                    float(line["used_core_s"]),
                )
            )
    return out


def month_policy(name: str) -> PolicySpec:
    """The month's policies as bench/month/policies.py sets them on the loopback YARN (4 executors at most)."""
    if name == "hand":
        return hand_policy()
    if name == "dynamic":
        return release_policy(name, max_executors=4)
    if name == "provider":
        return release_policy(name)
    raise ValueError(f"month run of unknown policy {name!r}; known: hand, dynamic, provider")


def simulated(run: MeasuredRun, cost: CostModel, loopback: LoopbackModel) -> dict[str, float]:
    """The run alone on the loopback YARN beside the tenant: each compared figure as the simulator counts it."""
    sim = Simulation(LOOPBACK_YARN, cost, month_policy(run.policy), [tpch_run(0, 0.0, run.scale)], loopback)
    sim.cluster.hold(TENANT_PLACES)
    summary = sim.run().summary()
    return {figure: float(summary[counterpart]) for figure, counterpart in FIGURES.items()}


def log_error(runs: Sequence[MeasuredRun], cost: CostModel, loopback: LoopbackModel) -> float:
    """Sum over ``runs`` and figures of the squared log of simulated / measured."""
    total = 0.0
    for run in runs:
        sim = simulated(run, cost, loopback)
        total += sum(math.log(sim[f] / getattr(run, f)) ** 2 for f in FIGURES if getattr(run, f) > 0 and sim[f] > 0)
    return total


def candidates(base: LoopbackModel, grid: Mapping[str, Sequence[float]]) -> Iterator[LoopbackModel]:
    names = list(grid)
    for values in product(*(grid[n] for n in names)):
        changes: dict[str, Any] = dict(zip(names, values, strict=True))
        yield replace(base, **changes)


def fit(
    runs: Sequence[MeasuredRun], cost: CostModel, base: LoopbackModel, grid: Mapping[str, Sequence[float]] = GRID
) -> tuple[LoopbackModel, float]:
    """The grid's model closest to ``runs`` (least squares of log ratios), and its RMS log error."""
    scored = ((log_error(runs, cost, model), model) for model in candidates(base, grid))
    error, best = min(scored, key=lambda pair: pair[0])
    return best, math.sqrt(error / max(1, len(runs) * len(FIGURES)))


def compared(runs: Sequence[MeasuredRun], cost: CostModel, loopback: LoopbackModel) -> dict[str, dict[str, Any]]:
    """Per policy: its runs, and per figure the median of simulated / measured and whether it agrees."""
    out: dict[str, dict[str, Any]] = {}
    for policy in sorted({r.policy for r in runs}):
        mine = [r for r in runs if r.policy == policy]
        ratios: dict[str, list[float]] = {f: [] for f in FIGURES}
        for run in mine:
            sim = simulated(run, cost, loopback)
            for f in FIGURES:
                if getattr(run, f) > 0:
                    ratios[f].append(sim[f] / getattr(run, f))
        figures = {
            f: {"median_ratio": round(statistics.median(r), 3), "agrees": abs(statistics.median(r) - 1) <= TOLERANCE}
            for f, r in ratios.items()
            if r
        }
        out[policy] = {"runs": len(mine), "fitted": policy == FIT_ON, "figures": figures}
    return out


def check(
    path: Path, cost: CostModel, base: LoopbackModel, grid: Mapping[str, Sequence[float]] = GRID
) -> dict[str, Any]:
    """The month's runs in ``path`` against the simulator, fitted on the dynamic runs; ``agrees`` when every held-out
    policy's every figure does. Nothing to compare (or no dynamic run to fit on) says so."""
    runs = read_runs(path)
    fitting = [r for r in runs if r.policy == FIT_ON]
    if not fitting:
        note = f"no successful {FIT_ON} run in {path.name} to fit on"
        return {"file": repo_path(path), "runs": len(runs), "agrees": None, "note": note}
    model, rms = fit(fitting, cost, base, grid)
    policies = compared(runs, cost, model)
    held_out = [fig["agrees"] for p in policies.values() if not p["fitted"] for fig in p["figures"].values()]
    return {
        "file": repo_path(path),
        "runs": len(runs),
        "dates": sorted({r.date for r in runs}),
        "cluster": asdict(LOOPBACK_YARN) | {"tenant_places": TENANT_PLACES},
        "fit_on": FIT_ON,
        "fitted": {name: getattr(model, name) for name in grid},
        "fit_rms_log_error": round(rms, 4),
        "tolerance": TOLERANCE,
        "policies": policies,
        "agrees": bool(held_out) and all(held_out),
    }
