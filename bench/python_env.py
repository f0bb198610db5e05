"""What shipping the Airflow worker's Python environment to YARN costs on the worker (``python_env`` auto).

Measures, for this interpreter's virtual environment: the content digest (asked before every YARN region),
packing the archive (once per digest), its size, and unpacking it (what each NodeManager does once per
digest). Nothing else runs Spark meanwhile.

Run: ``python -m bench python-env [--repeats 3]``; results go to bench/results/python-env.{json,md}.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from airflow_provider_finegrained.python_env import environment_digest, pack_environment
from bench.lib.report import write_results

RESULTS = Path(__file__).parent / "results"


def folder_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file() and not p.is_symlink())


def measure(repeats: int) -> dict[str, Any]:
    digests, packs, unpacks, sizes = [], [], [], []
    for _ in range(repeats):
        environment_digest.cache_clear()  # computed again each time, as a fresh worker process does
        began = time.perf_counter()
        digest = environment_digest()
        digests.append(time.perf_counter() - began)
        with tempfile.TemporaryDirectory() as work:
            archive = Path(work) / "env.tar.gz"
            began = time.perf_counter()
            sizes.append(pack_environment(archive))
            packs.append(time.perf_counter() - began)
            began = time.perf_counter()
            with tarfile.open(archive) as tar:
                tar.extractall(Path(work) / "environment", filter="tar")
            unpacks.append(time.perf_counter() - began)
    return {
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "environment": sys.prefix,
        "environment_bytes": folder_bytes(Path(sys.prefix)),
        "digest": digest,
        "repeats": repeats,
        "digest_s": digests,
        "pack_s": packs,
        "unpack_s": unpacks,
        "archive_bytes": sizes[-1],
    }


def report(result: dict[str, Any]) -> str:
    med = statistics.median
    return "\n".join(
        [
            "# Shipping the Python environment (python_env auto)",
            "",
            f"`python -m bench python-env --repeats {result['repeats']}`, Python {result['python']}.",
            "",
            "| What | Median | Range |",
            "|---|---|---|",
            *(
                f"| {name} | {med(result[key]):.2f} s | {min(result[key]):.2f}-{max(result[key]):.2f} s |"
                for name, key in (
                    ("content digest (every YARN region)", "digest_s"),
                    ("pack (once per digest)", "pack_s"),
                    ("unpack (once per NodeManager and digest)", "unpack_s"),
                )
            ),
            "",
            f"Environment on disk: {result['environment_bytes'] / 2**20:.0f} MiB; archive: "
            f"{result['archive_bytes'] / 2**20:.0f} MiB (pyspark's jars left out).",
            "",
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench python-env", description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    result = measure(args.repeats)
    write_results(RESULTS / "python-env.json", result, report(result), indent=1)
    print(report(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
