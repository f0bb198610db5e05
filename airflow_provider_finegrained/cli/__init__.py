"""Command-line tools: ``python -m airflow_provider_finegrained`` (also installed as ``finegrained``)."""
