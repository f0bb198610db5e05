#!/usr/bin/env bash
# Kill trials (issue 17): kill -9 a running stage task under `airflow standalone` and check for orphans,
# incomplete commits and the retry. Usage:
#   bash bench/kill_trials.sh [--trials 20] [--modes cold,warm] [--label after] [--source HEAD]
# Results: bench/results/kill_trials/<label>.json and .md (see docs/exactly-once.md).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || { source scripts/bootstrap.sh; PY=python; }
export SPARK_LOCAL_IP=127.0.0.1
exec "$PY" -m bench.kill_trials "$@"
