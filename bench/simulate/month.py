"""The month at 1,000 nodes (issue 33, item 3): the month's 30 days replayed on the simulated cluster.

The month (``python -m bench month``) runs one TPC-H DAG run a day on a loopback cluster, at the scale its
recorded pattern gives the day, under three policies. Here each day is a busy day of a 1,000-node cluster
shared by many teams: ``runs_per_day`` TPC-H runs at that day's scale arrive within ``window_s`` of the
day's start (a daily schedule fires every team's DAG at midnight), while the other tenants hold
``tenant_share`` of the executor places all day. The day's scales are read from ``bench/month/pattern.json``
as a file (this package imports no other benchmark).

The policies are the month's (``bench/month/policies.py``, read, not imported):

- ``hand``: the simulator's ``fixed`` with 4 executors per application and 16 shuffle partitions, AQE off:
  sized by hand for the month's worst day;
- ``dynamic``: Spark's defaults, dynamic allocation and AQE (the simulator's ``dynamic``);
- ``provider``: the provider with its default admission (``fit_now``). It learns nothing from history here:
  the simulated provider sizes every region from its upstreams' committed bytes, which it knows exactly.

Costs are the simulator's model fitted from the measured runs in ``bench/results/`` (as ``all`` uses). The
month's own measured runs (``bench/results/month.jsonl``) are simulated one by one on the loopback YARN and
compared (:mod:`bench.simulate.month_check`): the replay says whether its costs agree with what ran.
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

from bench.simulate.cluster import ClusterSpec
from bench.simulate.costs import RESULTS, CostModel
from bench.simulate.policies import PolicySpec
from bench.simulate.scenarios import RELEASE_IDLE_TIMEOUT_S, release_policy
from bench.simulate.sim import Simulation
from bench.simulate.workload import DagRun, WorkloadSpec, day_workload

PATTERN: Final = RESULTS.parent / "month" / "pattern.json"
"""The month's recorded days (``bench/month/pattern.py`` writes it)."""
MONTH_LINES: Final = RESULTS / "month.jsonl"
"""Where ``python -m bench month`` writes its measured (policy, day) lines."""
HAND_EXECUTORS: Final = 4
HAND_PARTITIONS: Final = 16
"""bench/month/policies.py's ``HandSized``: 4 executors, 16 shuffle partitions, dynamic allocation and AQE off."""
POLICIES: Final = ("hand", "dynamic", "provider")
SAVING: Final = 0.25
"""The provider's reserved core-seconds at least 25% below the hand-sized policy's (bench/month/results.py)."""
SLOWEST: Final = 1.1
"""No day's median run slower than 1.1x that day's best policy's."""
FIGURES: Final = (
    "runs",
    "makespan_s",
    "run_latency_s",
    "queue_s",
    "reserved_core_s",
    "reserved_breakdown_core_s",
    "used_core_s",
    "spilled_tasks",
    "reserved_over_cluster",
    "applications",
    "tasks",
    "capacity_outcomes",
    "wall_s",
)
"""What a day keeps of each policy's simulation summary."""
SUMMED: Final = ("runs", "reserved_core_s", "used_core_s", "spilled_tasks", "applications", "tasks", "wall_s")


@dataclass(frozen=True)
class MonthDay:
    """One recorded day: its index in the month, logical date, weekday, TPC-H scale and whether it is the spike."""

    index: int
    date: str
    weekday: str
    scale: float
    spike: bool


@dataclass(frozen=True)
class MonthSpec:
    """How each day is replayed: its runs, their arrival window, the other tenants' share and the seed."""

    runs_per_day: int = 10_000
    """The simulator's day holds 10,000 DAG runs; a month's day as many, all of the month's pipeline."""
    window_s: float = 600.0
    """The runs arrive within this many seconds of the day's start (the simulator's saturated window)."""
    tenant_share: float = 0.25
    """The executor places the other tenants hold all day (the month's tenant: 2 of the loopback's 8 vcores)."""
    seed: int = 1
    release_idle_timeout_s: float = RELEASE_IDLE_TIMEOUT_S

    def __post_init__(self) -> None:
        if self.runs_per_day < 1 or self.window_s <= 0 or not 0 <= self.tenant_share < 1:
            raise ValueError(
                f"month: runs_per_day >= 1, window_s > 0 and tenant_share in [0, 1) needed; got {self.runs_per_day}, "
                f"{self.window_s}, {self.tenant_share}"
            )


def read_pattern(path: Path = PATTERN, days: int | None = None) -> list[MonthDay]:
    """The recorded month's days in order (the first ``days`` of them)."""
    recorded = json.loads(path.read_text())["days"]
    out = [MonthDay(int(d["index"]), d["date"], d["weekday"], float(d["scale"]), bool(d["spike"])) for d in recorded]
    return out if days is None else out[:days]


def hand_policy() -> PolicySpec:
    """The month's hand-sized policy as the simulator's ``fixed``: its executors and partitions, AQE off."""
    return PolicySpec("fixed", fixed_executors=HAND_EXECUTORS, shuffle_partitions=HAND_PARTITIONS, adaptive=False)


def month_policies(spec: MonthSpec) -> dict[str, PolicySpec]:
    """The month's three policies as the simulator's (the provider's idle timeout as the provider sets it)."""
    return {
        "hand": hand_policy(),
        "dynamic": release_policy("dynamic", spec.release_idle_timeout_s),
        "provider": release_policy("provider", spec.release_idle_timeout_s),
    }


def day_runs(day: MonthDay, spec: MonthSpec) -> list[DagRun]:
    """The day's TPC-H runs at its scale, Poisson arrivals within the window (the day's shape over a whole day)."""
    workload = WorkloadSpec(
        runs=spec.runs_per_day,
        window_s=spec.window_s,
        tpch_share=1.0,
        min_scale=day.scale,
        decades=0.0,
        scale_steps=1,
        generated_shapes=0,
        diurnal=spec.window_s >= 86_400,
    )
    return day_workload(workload, spec.seed * 1000 + day.index)


def tenant_executors(cluster: ClusterSpec, spec: MonthSpec) -> int:
    return math.floor(cluster.total_executors * spec.tenant_share)


def simulate_day(
    cluster: ClusterSpec, cost: CostModel, policy: PolicySpec, runs: Sequence[DagRun], held: int
) -> dict[str, Any]:
    """One policy over one day's runs, ``held`` executor places taken by the other tenants: the kept figures."""
    sim = Simulation(cluster, cost, policy, runs)
    sim.cluster.hold(held)
    summary = sim.run().summary()
    return {key: summary[key] for key in FIGURES}


def replay(days: Sequence[MonthDay], cluster: ClusterSpec, cost: CostModel, spec: MonthSpec) -> list[dict[str, Any]]:
    """Every day in order under each policy: the day, each policy's figures and its median run against the best."""
    policies = month_policies(spec)
    held = tenant_executors(cluster, spec)
    out = []
    for day in days:
        runs = day_runs(day, spec)
        figures = {name: simulate_day(cluster, cost, policy, runs, held) for name, policy in policies.items()}
        out.append(asdict(day) | {"policies": figures, "p50_vs_best": vs_best(figures)})
        reserved = ", ".join(f"{name} {f['reserved_core_s']:.0f}" for name, f in figures.items())
        print(f"{day.date} SF {day.scale}: reserved core-s {reserved}", file=sys.stderr, flush=True)
    return out


def document(
    header: Mapping[str, Any],
    days: Sequence[MonthDay],
    cluster: ClusterSpec,
    cost: CostModel,
    spec: MonthSpec,
    check: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """simulate-month.json: ``header`` (command, machine, date), the setup, every day replayed, totals, goal, and
    ``check``: the month's measured runs against the simulator (:mod:`bench.simulate.month_check`)."""
    replayed = replay(days, cluster, cost, spec)
    return {
        **header,
        "spec": asdict(spec),
        "cluster": asdict(cluster) | {"total_executors": cluster.total_executors},
        "tenant_executors": tenant_executors(cluster, spec),
        "policies": {name: asdict(policy) for name, policy in month_policies(spec).items()},
        "history": "not modelled: the simulated provider sizes each region from its upstreams' committed bytes, "
        "known exactly, and learns nothing from earlier days",
        "costs": costs_source(cost, check),
        "cost_model": cost.to_dict(),
        "days": replayed,
        "totals": totals(replayed),
        "goal": goal(replayed),
    }


def vs_best(figures: Mapping[str, Mapping[str, Any]]) -> dict[str, float]:
    """Each policy's median run latency over the day's best policy's."""
    p50 = {name: float(f["run_latency_s"]["p50"]) for name, f in figures.items()}
    best = min(p50.values())
    return {name: round(v / best, 4) if best > 0 else 1.0 for name, v in p50.items()}


def totals(days: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per policy, the summed figures over ``days`` and its median and slowest day against the day's best."""
    out: dict[str, dict[str, Any]] = {}
    for name in POLICIES:
        mine = [d["policies"][name] for d in days if name in d["policies"]]
        out[name] = {key: round(sum(float(f[key]) for f in mine), 1) for key in SUMMED}
        out[name]["days"] = len(mine)
        out[name]["spilling_days"] = sum(1 for f in mine if f["spilled_tasks"])
        out[name]["capacity_waits"] = sum(int(f.get("capacity_outcomes", {}).get("wait", 0)) for f in mine)
        out[name]["slowest_day_p50_vs_best"] = max((d["p50_vs_best"][name] for d in days), default=None)
    return out


def goal(days: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Issue 33 item 3's goal as bench/month/results.py checks it, on what the simulator models: the provider's
    reserved core-seconds at least 25% below the hand-sized policy's and not above dynamic allocation's, no
    spill, no day's median run slower than 1.1x that day's best policy's. Failures and answers: not modelled."""
    total = totals(days)
    provider, hand, dynamic = total["provider"], total["hand"], total["dynamic"]
    slowest = provider["slowest_day_p50_vs_best"]
    checks = {
        "reserved_vs_hand": provider["reserved_core_s"] <= (1 - SAVING) * hand["reserved_core_s"],
        "reserved_vs_dynamic": provider["reserved_core_s"] <= dynamic["reserved_core_s"],
        "no_spill": provider["spilled_tasks"] == 0,
        "no_day_slower_than_1.1x_best": slowest is not None and slowest <= SLOWEST,
    }
    return {
        "days": len(days),
        "provider_reserved_vs_hand": _ratio(provider["reserved_core_s"], hand["reserved_core_s"]),
        "provider_reserved_vs_dynamic": _ratio(provider["reserved_core_s"], dynamic["reserved_core_s"]),
        "provider_slowest_day_vs_best": slowest,
        "slow_days": [d["date"] for d in days if d["p50_vs_best"]["provider"] > SLOWEST],
        "checks": checks,
        "not_modelled": ["no_failure", "answers_identical"],
        "met": all(checks.values()),
    }


def _ratio(value: float, reference: float) -> float | None:
    return round(value / reference, 4) if reference else None


def repo_path(path: Path) -> str:
    """``path`` from the repository's root when it is inside it (results files name no checkout)."""
    root = RESULTS.parent.parent
    return str(path.resolve().relative_to(root)) if path.resolve().is_relative_to(root) else str(path)


def costs_source(cost: CostModel, check: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Which costs the replay ran on (the fitted model), and how they compare with the month's own measured runs
    (``check``: :func:`bench.simulate.month_check.check`; None: not compared)."""
    lines = str(check["file"]) if check and "file" in check else repo_path(MONTH_LINES)
    agrees = None if check is None else check.get("agrees")
    if check is None or not check.get("runs"):
        note = "the month has not been measured yet (no successful run in that file)"
    elif agrees is None:
        note = str(check.get("note"))
    else:
        note = (
            f"{check['runs']} measured run(s) simulated one by one on the loopback YARN, the loopback model fitted "
            f"to the dynamic runs: the held-out policies {'agree' if agrees else 'do NOT agree'} within "
            f"{check['tolerance']:.0%} (see month_check)"
        )
    return {
        "used": "the simulator's cost model fitted from bench/results/compare-stages.csv and compare-runs.csv",
        "fit_error_median": cost.fit.get("error_all", {}).get("median_abs_rel_error"),
        "month_measurements": lines,
        "month_lines": 0 if check is None else int(check.get("runs", 0)),
        "month_agrees": agrees,
        "month_note": note,
        "month_check": dict(check or {}),
    }
