"""Kill trials: kill -9 a running stage task under ``airflow standalone`` and check what survives (issue 17).

``python -m tests.chaos --trials N [--modes cold,warm]``; see docs/exactly-once.md. The pure parts
(:mod:`.outcome`, :mod:`.table`, :mod:`.inspect_output`) are tested in tests/chaos/test_harness.py.
"""
