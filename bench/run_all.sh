#!/usr/bin/env bash
# Every benchmark in one command; results go to bench/results/ (JSON and Markdown).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/bootstrap.sh
python bench/plan_scaling.py
python bench/overhead.py --repeats 3
python bench/bytes_per_task.py
# The side-by-side comparison (fixed sizing, AQE, provider, separate apps, oracle); the planner ran above.
python -m bench.compare --repeats 3 --no-plan-scaling
