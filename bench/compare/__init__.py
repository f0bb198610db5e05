"""Side-by-side benchmark of the TPC-H example pipeline: fixed sizing, AQE, the provider, a hand-tuned oracle.

Run it with ``bash bench/compare.sh`` (or ``.venv/bin/python -m bench.compare``); see docs/benchmarks.md.
"""
