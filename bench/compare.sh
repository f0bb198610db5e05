#!/usr/bin/env bash
# The comparative benchmark: TPC-H pipeline, fixed sizing vs AQE vs the provider vs a hand-tuned oracle.
# Usage: bash bench/compare.sh [--scales 0.01 0.1 1] [--repeats 3] [--variants a b c d oracle e] [--sweep-oracle]
# Results: bench/results/compare-*, docs/img/bench-compare.png (see docs/benchmarks.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || { source scripts/bootstrap.sh; PY=python; }
exec "$PY" -m bench.compare "$@"
