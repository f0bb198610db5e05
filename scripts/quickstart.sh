#!/usr/bin/env bash
# Sets everything up from a fresh clone and runs the example: the parse-time plan of the TPC-H
# example DAG (regions, forward groups, slot sharing, memory fractions), then the run-time sizing
# of one of its joins for a small and a large day, to show parallelism following the data.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/bootstrap.sh

export AIRFLOW_HOME="${AIRFLOW_HOME:-$PWD/.quickstart/airflow}"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
mkdir -p "$AIRFLOW_HOME"

echo "== Plan of dags_examples/tpch_plan.py"
python -m airflow_provider_finegrained plan dags_examples/tpch_plan.py 2>/dev/null
for volume in 300m 40g; do
    echo
    echo "== q3_join sizing on local[2] when its inputs hold ${volume} (broadcast side 5m)"
    python -m airflow_provider_finegrained size --input-bytes "$volume" --broadcast-bytes 5m --stage q3_join
done
