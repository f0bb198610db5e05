"""The benchmark lab: every experiment runs as ``python -m bench <experiment> [options]`` (see ``--help``).

The experiments share one small library, :mod:`bench.lib` (the pipeline runner, measuring, statistics,
reports, the session builder, the sweep). They use the provider only through its public names.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Experiment:
    """One experiment of the command line: the module whose ``main(argv)`` runs it, and what it measures."""

    module: str
    summary: str


EXPERIMENTS: dict[str, Experiment] = {
    "compare": Experiment(
        "bench.compare.__main__",
        "the TPC-H pipeline side by side: fixed sizing, AQE, the provider (cold, warm) and a swept oracle",
    ),
    "substrate": Experiment(
        "bench.substrate.__main__",
        "same substrate: Spark's defaults, the provider's sizing and a swept oracle in one warm pool",
    ),
    "shared-cluster": Experiment(
        "bench.shared_cluster.__main__",
        "a shared cluster's cost: K concurrent DAG runs on one loopback standalone cluster, per policy",
    ),
    "warm-start": Experiment("bench.warm_start", "stage start latency: the warm pool against a cold spark-submit"),
    "warm-start-airflow": Experiment(
        "bench.warm_start_airflow", "warm stage start in a fresh Airflow task process under airflow standalone"
    ),
    "plan-scaling": Experiment("bench.plan_scaling", "the planner on generated DAGs of 1,000 to 100,000 stages"),
    "overhead": Experiment(
        "bench.overhead", "the provider's own overhead per stage: one region against separate applications"
    ),
    "skew": Experiment(
        "bench.skew.__main__",
        "a consumer over skewed input: Spark's defaults, the provider's sizing and its input balance",
    ),
    "history": Experiment(
        "bench.history.__main__",
        "estimates corrected by history: the TPC-H pipeline at growing scales, learning on",
    ),
    "stage-sweep": Experiment(
        "bench.stage_sweep", "each shuffling stage alone at each shuffle partition count (the history's judge)"
    ),
    "python-env": Experiment("bench.python_env", "what shipping the Python environment to YARN costs on the worker"),
    "app-start": Experiment(
        "bench.app_start", "an application's and an executor's start on this machine (the simulator's costs)"
    ),
    "cold-start": Experiment(
        "bench.cold_start", "the TPC-H example's cold starts: each part of the provider's JVM start alone and together"
    ),
    "month": Experiment(
        "bench.month.__main__",
        "a month of changing data: 30 daily TPC-H runs per policy on a shared loopback YARN (or standalone)",
    ),
    "simulate": Experiment(
        "bench.simulate.__main__",
        "the simulator: a shared cluster at 1,000 nodes, validated against shared-cluster's measurements",
    ),
}
"""Every experiment by its command-line name, in the order ``--help`` lists them."""
