"""The Airflow UI plugin: a run page (plan graph, per-stage decisions) and a sizing-history page.

``model``, ``graph``, ``plots`` and ``pages`` are pure Python; ``store`` (database), ``app`` (FastAPI,
auth) and ``plugin`` (registration) are the Airflow edge.
"""
