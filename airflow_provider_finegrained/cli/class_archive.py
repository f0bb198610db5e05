"""``finegrained class-archive``: make (or show) the class-data archive of a Spark install and a Java.

Regions make it themselves in the background the first time they run (``class_archive="auto"``); this makes it
now, for an image, a node (``--output`` a path every node shares), or after a failed making.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from airflow_provider_finegrained.spark import class_archive


def add_parser(commands: Any) -> None:
    parser = commands.add_parser("class-archive", help="make the class-data archive of Spark's classes (cold starts)")
    parser.add_argument("--spark-home", help="the Spark install (default: SPARK_HOME, else pyspark's)")
    parser.add_argument("--java-home", help="the Java (default: JAVA_HOME, else java on PATH)")
    parser.add_argument("--output", type=Path, help="where to write it (default: the provider's cache folder)")
    parser.add_argument("--show", action="store_true", help="print where it is (or would be) and whether it exists")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    if args.show:
        path = args.output or class_archive.archive_path(args.spark_home, args.java_home)
        state = "made" if path.is_file() else "failed" if path.with_suffix(".failed").exists() else "not made"
        print(f"{path} ({state})")
        return 0
    argv = [f"--{name}={value}" for name, value in (("spark-home", args.spark_home), ("java-home", args.java_home),
                                                    ("output", args.output)) if value]  # fmt: skip
    return class_archive.main(argv)
