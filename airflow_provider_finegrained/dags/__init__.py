"""Reading Airflow DAGs into the planning graph."""
