#!/usr/bin/env bash
# From a fresh clone: set everything up, generate a TPC-H data set, run the example pipeline with
# Airflow on the embedded default (local Spark, SQLite Airflow), and print what each stage read,
# decided and ran with. The stages run warm, as sessions of a Spark Connect pool this starts (see
# docs/warm.md). Usage: bash scripts/quickstart.sh [SCALE_FACTOR]   (default 0.1)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SCALE="${1:-0.1}"
source scripts/bootstrap.sh

QS="$PWD/.quickstart"
export AIRFLOW_HOME="$QS/airflow"
export AIRFLOW__CORE__DAGS_FOLDER="$PWD/dags_examples"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
mkdir -p "$AIRFLOW_HOME"

echo "== Airflow metadata database (SQLite) in $AIRFLOW_HOME"
airflow db migrate >"$QS/db-migrate.log" 2>&1 || { tail -30 "$QS/db-migrate.log"; exit 1; }

DATA="$QS/tpch/sf$SCALE"
echo "== TPC-H tables at scale factor $SCALE in $DATA"
python dags_examples/tpch_data.py --scale "$SCALE" --out "$DATA"

echo "== Class-data archive of Spark's classes, for faster JVM starts (once per Spark and Java; docs/cold-start.md)"
python -m airflow_provider_finegrained class-archive

echo "== Parse-time plan of tpch_pipeline"
python -m airflow_provider_finegrained plan dags_examples/tpch_pipeline.py 2>/dev/null

LOG="$QS/tpch_pipeline-sf$SCALE.log"
echo "== Running tpch_pipeline with airflow dags test (a few minutes; log: $LOG)"
if ! airflow dags test tpch_pipeline --conf "{\"data_dir\": \"$DATA\"}" >"$LOG" 2>&1; then
    tail -60 "$LOG"
    echo "tpch_pipeline failed; the full log is $LOG" >&2
    exit 1
fi
grep -q "state=success" "$LOG" || grep -qi "DagRun Finished.*success" "$LOG" || true

echo "== What each stage read, decided and ran with (scale factor $SCALE)"
python -m airflow_provider_finegrained report tpch_pipeline

echo "== The warm pool (regions ran as sessions of it; it stops itself after 10 idle minutes)"
python -m airflow_provider_finegrained warm status
echo "Stop it now with: AIRFLOW_HOME=$AIRFLOW_HOME .venv/bin/python -m airflow_provider_finegrained warm stop"
