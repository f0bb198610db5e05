"""Benchmark: a consumer stage over skewed input, with Spark's defaults, the provider's sizing, and its balance.

The data set: a fact table whose join keys follow a Zipf law (exponent ``ZIPF_S`` = 1.2 over ``KEYS``
keys: the hottest key holds 1 - 2^-0.2 = 12.9% of the rows, the next ones 6.8%, 4.5%...), written as a
producer partitioned by the key writes it: ``FILES`` (200, Spark's default shuffle partitions) parquet
files, so the hot key's rows are one file about 30x the median file. A dimension table of ``KEYS`` rows.
The consumer stage joins them on the key (broadcast joins off, as for a dimension too large to
broadcast), aggregates per dimension group, and writes the result.

Three variants run side by side in ONE warm ``local[2]`` session, in alternating order, ``--reps`` times:

- ``spark-defaults``: 200 shuffle partitions, AQE on with Spark's defaults, 128 MiB splits, 4 MiB open
  cost, upstream written with parquet's 128 MiB row groups;
- ``sizing``: the provider's decision with its balance undone (shuffle partitions from the decision,
  ``maxPartitionBytes`` from bytes / parallelism, Spark's open cost; AQE towards ``avg_bytes_per_task`` with
  Spark's skew thresholds), upstream written with parquet's default row groups;
- ``balance``: the provider's decision (``decide_region`` for the consumer alone over the measured file
  sizes, as ``finegrained size`` decides: split, open cost, AQE's advisory size, skew-join thresholds and
  coalesce floor), upstream written with the producer's ``write_options`` (row groups for its consumers'
  splits).
- ``balance-16m-row-groups``, ``balance-128m-row-groups`` (only with ``--variants``): the balance's
  settings over an upstream written with 16 MiB row groups, or the one ``spark-defaults`` reads (parquet's
  128 MiB), to isolate what the producer's row-group size costs or saves the scan.

Per run, from Spark's REST API (``/api/v1/applications/<app>/stages/<id>/<attempt>/taskList``): the fact
scan's task input (``inputMetrics.recordsRead``: Spark's ``bytesRead`` counts little of a parquet read in
this setup, and the rows are all about the same size) and the join stage's task shuffle-read bytes (local +
remote), as max/median; and the stage's wall time. Per scan and join stage, where the time went: the
stage's wall time (submission to completion), the tasks' summed duration, the longest task, and the
tasks' deserialization and scheduler delay (the per-task overhead the balance trades against). Also the
1-minute load average (the machine is shared).

Usage::

    python -m bench skew [--reps 3] [--rows 4000000] [--zipf 1.2] [--name skew]
    python -m bench skew --reps 3 --rows 2000000 --zipf 3 --name skew-hot  # a 75% hot key
    python -m bench skew --reps 5 --rows 12000000 --zipf 3 --name skew-row-groups \
        --variants spark-defaults,balance,balance-16m-row-groups,balance-128m-row-groups  # row groups' cost
    python -m bench skew --rerender bench/results/skew.json

Results: ``bench/results/skew.json`` and ``bench/results/skew.md``. Data lives in a temp dir, deleted after.

The modules: :mod:`~bench.skew.data` writes the fact and the dimension and holds the consumer stage;
:mod:`~bench.skew.settings` gives each variant's settings from the provider's decision;
:mod:`~bench.skew.run` runs the variants and reads Spark's stage metrics; :mod:`~bench.skew.report` holds
the summary and the Markdown; :mod:`bench.skew.__main__` the command line (``main(argv)``).
"""

from __future__ import annotations
