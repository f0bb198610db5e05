#!/usr/bin/env bash
# The whole test suite from a fresh clone: sets up what it needs, then lint, types and every test
# (slow end-to-end tests included; run `pytest -m "not slow"` for the fast ones alone).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/bootstrap.sh

# One command per line: under `set -e` a failure inside an `a && b` chain would not stop the script.
echo "== ruff"
ruff check .
ruff format --check .
echo "== mypy"
mypy
echo "== pytest"
bash scripts/install_browser.sh
python -m tests.jvm_start  # a class-data archive for the tests' Spark JVMs (tests/jvm_start.py)
if [ "$#" -eq 0 ]; then
    echo "== security trial matrix, short form (docs/security.md)"
    python -m pytest -q -m "security and not slow and not hadoop"
fi
python -m pytest "$@"
