"""A discrete-event simulator of a shared Spark cluster running DAGs of stages under three policies.

Policies: fixed-size applications, Spark dynamic allocation with AQE, and the provider (the planning core
decides every region). Plain Python, deterministic for a seed; no Airflow or Spark imports.
``python -m bench.simulate --help``; docs/simulation.md describes the model.

Its own package: of the provider it imports only the names ``airflow_provider_finegrained.planning``
exports (what the provider decides at run time, the region decision and the capacity gate, is modelled
from them: :mod:`bench.simulate.decision`), and no other benchmark module. What other experiments
measured it reads as files in bench/results/ (``compare-stages.csv``, ``compare-runs.csv``,
``app-start.json``, ``shared_cluster.json``). ``tests/bench/test_simulate.py`` checks both rules.
"""
