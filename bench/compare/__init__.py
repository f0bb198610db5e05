"""Side-by-side benchmark of the TPC-H example pipeline: fixed sizing, AQE, the provider, a hand-tuned oracle.

Run it with ``python -m bench compare`` (``--help``: its options); see docs/benchmarks.md.
"""
