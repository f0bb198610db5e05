#!/usr/bin/env bash
# The comparative benchmark: `python -m bench compare "$@"` (its options: `python -m bench compare --help`).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || { source scripts/bootstrap.sh; PY=python; }
exec "$PY" -m bench compare "$@"
