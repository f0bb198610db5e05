#!/usr/bin/env bash
# Every benchmark in one command; results go to bench/results/ (JSON and Markdown).
# `python -m bench --help` lists the experiments; `python -m bench <experiment> --help` gives one's options.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/bootstrap.sh
python -m bench plan-scaling
python -m bench overhead --repeats 3
# What shipping the Python environment to YARN costs on the Airflow worker (digest, pack, unpack).
python -m bench python-env --repeats 3
# The side-by-side comparison (fixed sizing, AQE, provider, separate apps, oracle); the planner ran above.
python -m bench compare --repeats 3 --no-plan-scaling
# Only the sizing differs: Spark's defaults, the provider and a swept oracle in one warm pool.
python -m bench substrate --scales 0.01,0.1,1,10 --repeats 3
# Skewed input: Spark's defaults, sizing alone, sizing with the input balance and skew settings.
python -m bench skew --reps 3
# History: the TPC-H pipeline at growing scales, corrected by its past runs, judged against sweeps in its own
# shape (every stage written): the whole pipeline at each count, then the shuffling stages alone, 9 times each.
SWEEP_WORK="${TMPDIR:-/tmp}/finegrained-sweep-blocking"
python -m bench compare --scales 1 --repeats 1 --variants oracle --sweep-oracle --sweep-blocking --sweep-repeats 5 \
  --sweep-candidates 1 2 4 8 16 --sweep-file bench/results/compare-oracle-sweep-sf1-blocking.json \
  --results "$SWEEP_WORK" --image "$SWEEP_WORK/img.png" --work "$SWEEP_WORK/work" --no-plan-scaling
mkdir -p bench/results/history-run3 bench/results/history-run3-stage-sweep
python -m bench history --scales 0.01 0.1 0.3 1 --then 2 --alternate 3 \
  --sweep-file bench/results/compare-oracle-sweep-sf1-blocking.json --results bench/results/history-run3
python -m bench stage-sweep --upstream "$SWEEP_WORK/work/sweep-4-0/out" --candidates 1 2 4 8 --repeats 9 \
  --out bench/results/stage-sweep-sf1.json
cp bench/results/history-run3/history.json bench/results/history-run3-stage-sweep/
python -m bench history --report-only --results bench/results/history-run3-stage-sweep \
  --sweep-file bench/results/stage-sweep-sf1.json
# Warm start: a Spark Connect session of the pool against a cold spark-submit, then in a fresh task process
# under airflow standalone.
python -m bench warm-start --repeats 5
python -m bench warm-start-airflow --repeats 5
# Cold starts: each part of the JVM start alone and together, then the JIT alone at SF 1 and 10.
python -m bench cold-start --scale 0.01 --rounds 2
python -m bench cold-start --scale 1 --rounds 2 --variants jit-c1,jit-tiered --output cold_start_jit_sf1
python -m bench cold-start --scale 10 --rounds 1 --variants jit-c1,jit-tiered --output cold_start_jit_sf10
# A shared cluster's cost, then the simulator validated against it and run at 1,000 nodes.
python -m bench shared-cluster --scales 0.01,0.01,0.1,0.1,0.3,1 --repeats 3
python -m bench app-start
python -m bench simulate all
python -m bench simulate validate
