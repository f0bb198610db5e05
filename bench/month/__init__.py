"""A month of changing data on a shared cluster: three policies over 30 days of the TPC-H pipeline (issue 33, item 3).

- ``pattern.py``: the month's daily scales, seeded and recorded in ``pattern.json``.
- ``policies.py``: the policies (hand-sized for the worst day, dynamic allocation with AQE, the provider with
  history), each a typed config.
- ``dags.py``: each policy's DAG; ``cluster.py``: the loopback YARN or standalone cluster and the other tenant
  (``tenant.py``, its application).
- ``run.py``: one session's runs; ``measure.py``: a run's figures and answers; ``results.py``: the result lines,
  totals and goal; ``report.py``: month.md.
"""
