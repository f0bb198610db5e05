"""The simulator's scenarios: a day on a large cluster, item 2's shared-cluster setup, and its validation.

Item 2 (issue 15) measures K concurrent TPC-H DAG runs on a loopback standalone cluster; its results
file (``bench/results/shared_cluster.json``) is read by :func:`validate`, which simulates exactly that
setup and reports simulated / measured for every figure. Two shapes are read. The plain one::

    {
      "setup": {"workers": 2, "worker_cores": 4, "worker_memory": "6g",
                "executor_cores": 1, "executor_memory": "1g", "max_executors": 4,
                "scales": [0.01, 0.01, 0.1, 0.1, 0.3, 1]},
      "policies": {"fixed":    {"makespan_s": ..., "reserved_core_s": ..., "used_core_s": ..., "queue_s": ...},
                   "dynamic":  {...},
                   "provider": {...}}
    }

and the one ``python -m bench.shared_cluster`` writes (``cluster``: workers, cores_per_worker, memory;
``scales``; ``shape``: executor_cores, executor_memory, max_executors; ``summary``: per policy the medians
over repeats). Figures as item 2 reads them from the event logs: ``makespan_s`` first trigger to last
run's end; ``reserved_core_s`` executor cores x (ExecutorAdded to removal); ``used_core_s`` task time x
task cpus; ``queue_s`` the sum over applications of application start to first executor added.
Policies may be left out (item 2 compares the provider with dynamic allocation).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from bench.simulate.cluster import ClusterSpec
from bench.simulate.costs import CostModel
from bench.simulate.loopback import LoopbackModel
from bench.simulate.policies import POLICIES, RELEASING, PolicySpec
from bench.simulate.sim import simulate
from bench.simulate.workload import DagRun, WorkloadSpec, day_workload, tpch_run

TOLERANCE = 0.20
"""The simulator is validated when every simulated figure is within 20% of the measured one."""
VALIDATED_FIGURES = ("makespan_s", "reserved_core_s", "used_core_s", "queue_s")
SIMULATED_AS = {
    "makespan_s": "makespan_s",
    "reserved_core_s": "added_core_s",
    "used_core_s": "used_core_s",
    "queue_s": "app_queue_sum_s",
}
"""Each measured figure's simulated counterpart, counted the way an event log counts it."""


@dataclass(frozen=True)
class SharedClusterSetup:
    """Item 2's setup: a small standalone cluster and K TPC-H runs started together."""

    workers: int = 2
    worker_cores: int = 4
    worker_memory: int | str = "6g"
    executor_cores: int = 1
    executor_memory: int | str = "1g"
    max_executors: int = 4
    """The fixed policy's executors and the dynamic policy's cap, per application."""
    default_parallelism: int = 4
    scales: tuple[float, ...] = (0.01, 0.01, 0.1, 0.1, 0.3, 1.0)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SharedClusterSetup:
        known = set(cls.__dataclass_fields__)
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"shared-cluster setup: unknown keys {sorted(unknown)}; allowed: {sorted(known)}")
        values = dict(data)
        if "scales" in values:
            values["scales"] = tuple(float(s) for s in values["scales"])
        setup = cls(**values)
        if not setup.scales or min(setup.scales) <= 0:
            raise ValueError(
                f"shared-cluster setup: scales must be a non-empty list of numbers > 0, got {setup.scales}"
            )
        return setup

    def cluster(self) -> ClusterSpec:
        return ClusterSpec(
            self.workers,
            self.worker_cores,
            self.worker_memory,  # type: ignore[arg-type]  # ClusterSpec parses "4g"
            self.executor_cores,
            self.executor_memory,  # type: ignore[arg-type]
        )

    def runs(self) -> list[DagRun]:
        return [tpch_run(i, 0.0, scale) for i, scale in enumerate(self.scales)]

    def policy(self, name: str) -> PolicySpec:
        return release_policy(
            name,
            fixed_executors=self.max_executors,
            max_executors=self.max_executors,
            default_parallelism=self.default_parallelism,
        )


RELEASE_IDLE_TIMEOUT_S = 30.0
"""The releasing provider variants' idle timeout: planning/capacity.py's EXECUTOR_IDLE_TIMEOUT_S (30 s
for executorIdleTimeout and shuffleTracking.timeout alike). bench/results/simulate.* made before the
first-job model used 15 s for provider+release, its value before commit e8bd7b5."""


def release_policy(name: str, idle_timeout_s: float = RELEASE_IDLE_TIMEOUT_S, **settings: Any) -> PolicySpec:
    """A policy with the provider's release settings where it releases (one timeout for idle and shuffle)."""
    if name in RELEASING:
        settings |= {"idle_timeout_s": idle_timeout_s, "shuffle_timeout_s": idle_timeout_s}
    return PolicySpec(name, **settings)


def shared_cluster(
    setup: SharedClusterSetup,
    cost: CostModel,
    policies: Sequence[str] = POLICIES,
    loopback: LoopbackModel | None = None,
) -> dict[str, dict[str, Any]]:
    """Simulate item 2's setup under each policy: the figures item 2 measures, per policy."""
    cluster, runs = setup.cluster(), setup.runs()
    return {name: simulate(cluster, cost, setup.policy(name), runs, loopback) for name in policies}


BACKGROUND_GRID = tuple(i / 2 for i in range(31))
"""Background loads the fit tries: 0 to 15 runnable threads."""
WARMUP_GRID = tuple(float(i) for i in range(21))
"""A fresh executor's first-task warm-ups the fit tries: 0 to 20 CPU seconds."""
DRIVER_JOB_GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)
"""The driver's CPU seconds per job the fit tries."""
FIT_FIGURES = ("makespan_s", "used_core_s", "reserved_core_s")
"""The figures of one measured policy the loopback fit matches (the others, and every other policy's, are held out)."""


def fit_loopback_to(
    setup: SharedClusterSetup,
    cost: CostModel,
    base: LoopbackModel,
    measured: Mapping[str, Any],
    policy: str = "dynamic",
    backgrounds: Sequence[float] = BACKGROUND_GRID,
    warmups: Sequence[float] = WARMUP_GRID,
    driver_jobs: Sequence[float] = DRIVER_JOB_GRID,
) -> tuple[LoopbackModel, dict[str, Any]]:
    """Background load, a fresh executor's first-task warm-up and the driver's work per job that best match one
    policy's makespan, used and reserved core-seconds (least squares of log ratios over a grid). None of the
    three is measured apart in item 2's files."""
    best: tuple[float, LoopbackModel] | None = None
    for background in backgrounds:
        for warmup in warmups:
            for driver_job in driver_jobs:
                model = replace(
                    base, background_load=background, executor_warmup_cpu_s=warmup, driver_job_cpu_s=driver_job
                )
                sim = simulate(setup.cluster(), cost, setup.policy(policy), setup.runs(), model)
                error = sum(math.log(sim[SIMULATED_AS[f]] / float(measured[f])) ** 2 for f in FIT_FIGURES)
                if best is None or error < best[0]:
                    best = (error, model)
    assert best is not None
    error, fitted = best
    return fitted, {
        "policy": policy,
        "figures": list(FIT_FIGURES),
        "background_load": fitted.background_load,
        "executor_warmup_cpu_s": fitted.executor_warmup_cpu_s,
        "driver_job_cpu_s": fitted.driver_job_cpu_s,
        "rms_log_error": round(math.sqrt(error / len(FIT_FIGURES)), 4),
    }


def validate(
    measured_path: Path,
    cost: CostModel,
    loopback: LoopbackModel | None = None,
    fit_on: str = "dynamic",
    grid: Mapping[str, Sequence[float]] | None = None,
    simulate_as: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Simulate the measured file's setup and compare: simulated / measured for every figure and policy.

    With ``loopback``, the simulation runs on item 2's shared physical cores, with the background load, the
    executor warm-up and the driver's work per job fitted to ``fit_on``'s :data:`FIT_FIGURES` first: those are
    marked fitted, every other figure is held out. Validated means every figure within 20%. ``simulate_as``
    maps a measured policy to the simulated one that ran as it did (a run of the provider at an older
    commit: ``{"provider": "provider+start"}``).
    """
    measured = _read_measured(measured_path)
    setup = SharedClusterSetup.from_dict(measured.get("setup", {}))
    by_policy = measured.get("policies") or {}
    as_run = _simulated_as(measured_path, by_policy, simulate_as)
    fit: dict[str, Any] | None = None
    if loopback is not None:
        if fit_on not in by_policy:
            raise ValueError(
                f"{measured_path}: the loopback fit needs policy {fit_on!r}; the file has {sorted(by_policy)}"
            )
        loopback, fit = fit_loopback_to(setup, cost, loopback, by_policy[fit_on], fit_on, **(grid or {}))
    simulated = shared_cluster(setup, cost, sorted(set(as_run.values()), key=POLICIES.index), loopback)
    comparison = {
        policy: _compared(figures, simulated[as_run[policy]], fit is not None and policy == fit_on)
        for policy, figures in by_policy.items()
    }
    validated = [row for rows in comparison.values() for f, row in rows.items() if f in VALIDATED_FIGURES]
    return {
        "measured_file": str(measured_path),
        "setup": setup.__dict__ | {"scales": list(setup.scales)},
        "tolerance": TOLERANCE,
        "loopback": loopback.to_dict() if loopback is not None else None,
        "fit": fit,
        "simulated_as": as_run,
        "validated": all(row["within"] for row in validated),
        "held_out_within": all(row["within"] or row["fitted"] for row in validated),
        "comparison": comparison,
    }


def _read_measured(measured_path: Path) -> dict[str, Any]:
    """Item 2's measured file, in the plain shape."""
    try:
        measured: dict[str, Any] = json.loads(measured_path.read_text())
    except FileNotFoundError:
        raise FileNotFoundError(
            f"no measured shared-cluster results at {measured_path}: item 2 writes them (see docs/simulation.md)"
        ) from None
    if "summary" in measured and "policies" not in measured:
        measured = _from_shared_cluster_run(measured)
    return measured


def _simulated_as(
    measured_path: Path, by_policy: Mapping[str, Mapping[str, Any]], simulate_as: Mapping[str, str] | None
) -> dict[str, str]:
    """Each measured policy's simulated one, once the file's policies and figures and ``simulate_as`` are checked."""
    unknown = set(by_policy) - set(POLICIES)
    if not by_policy or unknown:
        raise ValueError(f"{measured_path}: 'policies' must hold some of {list(POLICIES)}, got {sorted(by_policy)}")
    for policy, figures in by_policy.items():
        missing = [f for f in VALIDATED_FIGURES if f not in figures]
        if missing:
            raise ValueError(f"{measured_path}: policy {policy!r} lacks {missing} (needs {list(VALIDATED_FIGURES)})")
    unmeasured = sorted(set(simulate_as or {}) - set(by_policy))
    if unmeasured:
        raise ValueError(f"simulate_as {unmeasured}: {measured_path} measured only {sorted(by_policy)}")
    as_run = {p: (simulate_as or {}).get(p, p) for p in by_policy}
    bad = {p: q for p, q in as_run.items() if q not in POLICIES}
    if bad:
        raise ValueError(f"simulate_as {bad}: a simulated policy must be one of {list(POLICIES)}")
    return as_run


def _compared(figures: Mapping[str, Any], sim: Mapping[str, Any], fitted_on: bool) -> dict[str, dict[str, Any]]:
    """One policy's measured ``figures`` against its simulation ``sim``: each validated figure's ratio and whether
    it is within the tolerance (or was fitted: ``fitted_on``, the policy the loopback model was fitted to)."""
    rows = {}
    for figure in VALIDATED_FIGURES:
        measured_value = float(figures[figure])
        sim_value = float(sim[SIMULATED_AS[figure]])
        ratio = sim_value / measured_value if measured_value else None
        rows[figure] = {
            "measured": measured_value,
            "simulated": round(sim_value, 3),
            "ratio": ratio,
            "within": ratio is not None and abs(ratio - 1) <= TOLERANCE,
            "fitted": fitted_on and figure in FIT_FIGURES,
        }
    for figure in ("applications", "tasks"):  # not validated: they say where the model's work differs
        if figure in figures:
            rows[figure] = {
                "measured": float(figures[figure]),
                "simulated": float(sim[figure]),
                "ratio": sim[figure] / float(figures[figure]) if figures[figure] else None,
                "within": None,
                "fitted": False,
            }
    return rows


def _from_shared_cluster_run(data: Mapping[str, Any]) -> dict[str, Any]:
    """``python -m bench.shared_cluster``'s results file in the plain shape."""
    cluster, shape = data.get("cluster") or {}, data.get("shape") or {}
    setup: dict[str, Any] = {"scales": [float(s) for s in data.get("scales") or ()]}
    for theirs, ours, source in (
        ("workers", "workers", cluster),
        ("cores_per_worker", "worker_cores", cluster),
        ("memory", "worker_memory", cluster),
        ("executor_cores", "executor_cores", shape),
        ("executor_memory", "executor_memory", shape),
        ("max_executors", "max_executors", shape),
    ):
        if theirs in source:
            setup[ours] = source[theirs]
    if "executor_cores" in setup and "max_executors" in setup:
        setup["default_parallelism"] = max(2, int(setup["executor_cores"]) * int(setup["max_executors"]))
    summary = data["summary"]
    return {"setup": setup, "policies": {p: summary[p] for p in POLICIES if isinstance(summary.get(p), dict)}}


def scale_scenario(
    cluster: ClusterSpec,
    cost: CostModel,
    workload: WorkloadSpec,
    seed: int,
    policies: Sequence[str] = POLICIES,
    release_idle_timeout_s: float = RELEASE_IDLE_TIMEOUT_S,
    min_admit_share: float = 0.0,
) -> dict[str, Any]:
    """One workload on one cluster under each policy (``min_admit_share`` for the provider's variants)."""
    runs = day_workload(workload, seed)
    specs = {
        name: release_policy(
            name,
            release_idle_timeout_s,
            **({"min_admit_share": min_admit_share} if name.startswith("provider") else {}),
        )
        for name in policies
    }
    results = {name: simulate(cluster, cost, spec, runs) for name, spec in specs.items()}
    return {
        "workload": workload.__dict__ | {"generated_stages": list(workload.generated_stages)},
        "seed": seed,
        "cluster": cluster.__dict__ | {"total_executors": cluster.total_executors},
        "policies": results,
        "ratios": ratios(results),
    }


CLOSED_LOOP_POLICIES = ("fixed", "dynamic", "provider", "provider+start", "provider+queue")
"""The policies the closed-loop scenario runs by default (each simulation there takes a minute)."""


def closed_loop_scenario(
    cluster: ClusterSpec,
    cost: CostModel,
    workload: WorkloadSpec,
    seed: int,
    streams: Sequence[int],
    horizon_s: float,
    policies: Sequence[str] = CLOSED_LOOP_POLICIES,
    release_idle_timeout_s: float = RELEASE_IDLE_TIMEOUT_S,
) -> dict[str, Any]:
    """Throughput as TPC's throughput tests measure it: ``n`` streams of runs back to back, for each ``n``.

    Every stream starts its next run (the workload's runs in order, shared by all streams) when its last one
    ends; the runs finished by ``horizon_s`` are the throughput. Unlike runs arriving in a short window, no
    drain at the end lets one long run set the figure.
    """
    runs = day_workload(workload, seed)
    specs = {name: release_policy(name, release_idle_timeout_s) for name in policies}
    by_streams = {}
    for n in streams:
        results = {name: simulate(cluster, cost, spec, runs, None, n, horizon_s) for name, spec in specs.items()}
        by_streams[str(n)] = {"policies": results, "ratios": ratios(results)}
    return {
        "workload": workload.__dict__ | {"generated_stages": list(workload.generated_stages)},
        "seed": seed,
        "cluster": cluster.__dict__ | {"total_executors": cluster.total_executors},
        "horizon_s": horizon_s,
        "streams": by_streams,
    }


def ratios(results: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """The provider against each other policy: throughput (higher is better) and reserved core-seconds."""
    out: dict[str, float] = {}
    for mine in (p for p in POLICIES if p.startswith("provider")):
        provider = results.get(mine)
        if not provider:
            continue
        for other in ("fixed", "dynamic"):
            if other not in results:
                continue
            base = results[other]
            out[f"throughput_{mine}_over_{other}"] = round(
                provider["throughput_runs_per_h"] / base["throughput_runs_per_h"], 3
            )
            out[f"reserved_{other}_over_{mine}"] = round(base["reserved_core_s"] / provider["reserved_core_s"], 3)
            out[f"makespan_{other}_over_{mine}"] = round(base["makespan_s"] / provider["makespan_s"], 3)
    return out


def with_window(workload: WorkloadSpec, window_s: float) -> WorkloadSpec:
    return replace(workload, window_s=window_s)
