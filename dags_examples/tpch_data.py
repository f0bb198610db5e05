"""TPC-H test data: the eight tables as parquet, written by ``tpchgen-cli`` (``pip install tpchgen-cli``).

``tpchgen-cli parquet`` writes one file per table, ``<out_dir>/<table>.parquet``: integer keys as int64
(``l_linenumber``, ``o_shippriority`` and a few counts as int32), money and quantities as ``decimal(15, 2)``,
dates as ``date32`` and text as strings. A marker file, ``_tpchgen.json``, records the scale and the tables
written at that scale, so a second call with the same scale generates nothing.

Usage: ``python dags_examples/tpch_data.py --scale 0.01 --out DIR``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

TABLES: tuple[str, ...] = ("lineitem", "orders", "customer", "supplier", "nation", "region", "part", "partsupp")
MARKER = "_tpchgen.json"


def tpchgen_cli() -> Path:
    """The ``tpchgen-cli`` executable: next to the running Python first, then on PATH."""
    found = shutil.which("tpchgen-cli", path=str(Path(sys.executable).parent)) or shutil.which("tpchgen-cli")
    if found is None:
        raise FileNotFoundError(
            "tpchgen-cli not found next to the running Python or on PATH; install it with: pip install tpchgen-cli"
        )
    return Path(found)


def _scale_text(scale: float) -> str:
    return repr(float(scale))


def _read_marker(out_dir: Path) -> tuple[str | None, set[str]]:
    try:
        data = json.loads((out_dir / MARKER).read_text())
        return str(data["scale"]), set(data["tables"])
    except (OSError, ValueError, KeyError, TypeError):
        return None, set()


def _write_marker(out_dir: Path, scale: str, tables: set[str]) -> None:
    tmp = out_dir / (MARKER + ".tmp")
    tmp.write_text(json.dumps({"scale": scale, "tables": sorted(tables)}) + "\n")
    tmp.replace(out_dir / MARKER)


def generate(scale: float, out_dir: str | Path) -> dict[str, Path]:
    """Write the TPC-H tables at ``scale`` into ``out_dir`` (skipping those already there) and return their paths."""
    if not scale > 0:
        raise ValueError(f"scale must be positive, got {scale!r}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {table: out / f"{table}.parquet" for table in TABLES}
    scale_text = _scale_text(scale)
    marked_scale, done = _read_marker(out)
    if marked_scale != scale_text:
        done = set()
    missing = [table for table in TABLES if table not in done or not paths[table].is_file()]
    if not missing:
        return paths
    # Unmark what is about to be rewritten first: an interrupted run must not leave a half file marked done.
    done -= set(missing)
    _write_marker(out, scale_text, done)
    cmd = [
        str(tpchgen_cli()),
        "parquet",
        "--scale-factor",
        scale_text,
        "--output-dir",
        str(out),
        "--tables",
        ",".join(missing),
        "--overwrite",
        "--quiet",
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed with exit code {result.returncode}:\n{result.stderr.strip()}")
    absent = [table for table in missing if not paths[table].is_file()]
    if absent:
        raise RuntimeError(f"tpchgen-cli did not write {', '.join(absent)} into {out}")
    _write_marker(out, scale_text, done | set(missing))
    return paths


def main(argv: list[str] | None = None) -> int:
    """Command line: generate the tables and print one ``table path`` line each."""
    parser = argparse.ArgumentParser(description="Generate TPC-H parquet tables with tpchgen-cli.")
    parser.add_argument("--scale", type=float, default=0.01, help="TPC-H scale factor (default: 0.01)")
    parser.add_argument("--out", required=True, help="output directory")
    args = parser.parse_args(argv)
    for table, path in generate(args.scale, args.out).items():
        print(f"{table}\t{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
