"""The other tenant: a steady Spark application that keeps its executors and works part of the time, until killed.

``spark-submit tenant.py '{"rows": N, "partitions": P, "busy": 0.5}'``: a job hashing and summing ``rows``
rows in ``partitions`` tasks, then idle for as long again times ``(1 - busy) / busy``, over and over.
"""

from __future__ import annotations

import json
import sys
import time


def main(argv: list[str]) -> int:
    from pyspark.sql import SparkSession

    spec = json.loads(argv[1])
    rows, partitions, busy = int(spec["rows"]), int(spec["partitions"]), float(spec["busy"])
    spark = SparkSession.builder.getOrCreate()
    while True:
        started = time.monotonic()
        spark.range(0, rows, numPartitions=partitions).selectExpr("sum(hash(id))").collect()
        worked = time.monotonic() - started
        time.sleep(worked * (1 - busy) / busy if 0 < busy < 1 else 0.0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
