"""A discrete-event simulator of a shared Spark cluster running DAGs of stages under three policies.

Policies: fixed-size applications, Spark dynamic allocation with AQE, and the provider (the real
planning core decides every region). Plain Python, deterministic for a seed; no Airflow or Spark
imports. ``python -m bench.simulate --help``; docs/simulation.md describes the model.
"""
