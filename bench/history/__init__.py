"""Estimates corrected by history: the TPC-H pipeline run in sequence at growing scales, learning on.

``python -m bench history [--scales 0.01 0.1 0.3 1] [--min-runs 3] [--then 2] [--alternate 3] [--work DIR]``

Each stage runs as its own region (the example DAG with its pipelined edges made blocking, so every stage
has Spark jobs of its own to learn from) on the provider's warm pool, under ``airflow dags test``. Runs
1..k go in sequence at the given scales with ``learn_from_history`` on and ``history_min_runs`` = N; after
N runs every shuffling stage decides from ``bytes x learned expansion``. The last scale is then run once
more with the history not used (``history_min_runs`` = 1000: recorded, never applied): the uncorrected
decision side by side; then ``--then`` more runs at the last scale with the history on, so that a stage that
shuffles only at the last scale (a join broadcast below it) has its N runs too; then ``--alternate`` pairs
of a history-on and an uncorrected run, so that stage times compare at one load. The side-by-side table
sets the newest decisions of each kind against each other, with stage seconds as medians over the runs
after the first uncorrected one that ran the stage at that count. Per stage and run: the decided
parallelism and rule, Spark's spill bytes, the stage's time, the learned factors, and the swept per-stage
best from ``--sweep-file`` (shuffle partitions per stage, AQE off; ``python -m bench compare --sweep-oracle
--sweep-blocking`` and ``python -m bench stage-sweep`` time every stage on its own, as here) where it has
the scale.

Results: bench/results/history.json and history.md. Each run is one sample; each records the machine's load

The modules: :mod:`~bench.history.verdicts` judges each stage's decided parallelism against the oracle sweep
(best, near-best, within 25%); :mod:`~bench.history.report` writes the Markdown (the side-by-side table and
one table per run); :mod:`bench.history.__main__` is the command line (``main(argv)``) and the run sequence.
"""
