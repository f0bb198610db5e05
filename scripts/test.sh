#!/usr/bin/env bash
# The whole test suite from a fresh clone: sets up what it needs, then lint, types, import contracts and every test
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
echo "== import contracts (pyproject.toml's [tool.importlinter])"
lint-imports
echo "== pytest"
bash scripts/install_browser.sh
ensure_rehearsal_packages
python -m tests.jvm_start  # a class-data archive for the tests' Spark JVMs (tests/jvm_start.py)
if [ "$#" -eq 0 ]; then
    echo "== security trial matrix, short form (docs/security.md)"
    python -m pytest -q -m "security and not slow and not hadoop"
fi
# Every test's durations, slowest first (tests/conftest.py), and the top 10 last in the log, pass or fail.
rm -f .cache/ci-durations.txt
status=0
# The whole suite in two workers: half its time a test waits on a JVM, a cluster or Airflow, and the other
# worker uses the second core meanwhile. Tests sharing a cluster or a pool stay in one worker (tests/worker_groups.py).
workers=()
[ "$#" -eq 0 ] && workers=(-n 2 --dist loadgroup)
FINEGRAINED_DURATIONS_FILE=.cache/ci-durations.txt python -m pytest "${workers[@]}" "$@" || status=$?
echo "== the 10 slowest test phases (all of them in .cache/ci-durations.txt)"
head -n 10 .cache/ci-durations.txt || true
exit "$status"
