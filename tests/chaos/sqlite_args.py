"""SQLite connect arguments for the harnesses' Airflow (``[database] sql_alchemy_connect_args`` imports this).

sqlite3 gives up on a locked database after 5 s; under the shared-cluster benchmark's load (1-minute load
average 30 to 50 on 2 cores) a writer held the lock longer and Airflow's scheduler died on "database is
locked", leaving every DAG run stuck. Waiting up to 120 s for the lock keeps it alive.
"""

CONNECT_ARGS = {"timeout": 120}
