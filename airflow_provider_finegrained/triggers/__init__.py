"""Triggers: waits that hold no Airflow worker slot."""
