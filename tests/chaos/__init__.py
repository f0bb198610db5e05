"""Kill trials: kill -9 a task at a chosen moment and check what survives it (issue 17; docs/exactly-once.md).

``python -m tests.chaos --trials N [--modes cold,warm,region] [--label L] [--source REV]`` runs N trials per
mode, writes ``bench/results/kill_trials/<label>.json`` and ``.md`` and prints the table. The modes:

- ``cold`` and ``warm``: a stage task under ``airflow standalone`` (:mod:`.standalone`) running the trial DAG
  (:mod:`.trial_dag`), killed while its Spark job writes (:mod:`.runner`); then the processes of the killed
  try (:mod:`.processes`), the committed outputs and leftovers (:mod:`.inspect_output`) and the retry;
- ``region``: no Airflow: a stand-in task (:mod:`.region_task`) running one real local region, killed at a
  moment of its launch (:mod:`.region`); then every process of its region must be gone.

Each trial's record and verdict: :mod:`.outcome`; the table and results files: :mod:`.table`, :mod:`.results`.
In CI: the pure parts (test_harness.py) and one region trial (test_task_owns_its_spark.py, slow).
"""
