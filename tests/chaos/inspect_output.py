"""Read a stage's folder on local disk as a reader would: every ``_COMMITTED`` marker checked against its files.

Independent of the provider's own reader on purpose (the harness must not trust the code it tests):
the marker is plain JSON naming files relative to its folder, with their sizes and the rows.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.chaos.outcome import MarkerCheck

MARKER = "_COMMITTED"
_TRY = re.compile(r"try=(\d+)$")


def parquet_rows(path: Path) -> int:
    """Rows in one parquet file, from its footer."""
    import pyarrow.parquet as pq

    return int(pq.read_metadata(str(path)).num_rows)


def check_marker(folder: Path, stage_folder: Path) -> MarkerCheck:
    """Check the marker in ``folder`` (a ``try=<n>`` folder): listed files, sizes, rows."""
    location = folder.relative_to(stage_folder).as_posix()
    match = _TRY.search(folder.name)
    try_number = int(match.group(1)) if match else 0
    try:
        record = json.loads((folder / MARKER).read_text(encoding="utf-8"))
        files = [str(name) for name in record["files"]]
        sizes = [int(size) for size in record["partition_bytes"]]
        claimed = int(record["rows"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return MarkerCheck(location, try_number, 0, 0, error=f"{type(exc).__name__}: {exc}")
    missing: list[str] = []
    mismatched: list[str] = []
    rows = 0
    readable = 0
    for name, size in zip(files, sizes, strict=False):
        path = folder / name
        if not path.is_file():
            missing.append(name)
            continue
        if path.stat().st_size != size:
            mismatched.append(f"{name}: {path.stat().st_size} bytes, marker says {size}")
        try:
            rows += parquet_rows(path)
            readable += 1
        except Exception as exc:  # a torn file is a finding, not a harness crash
            mismatched.append(f"{name}: unreadable ({type(exc).__name__})")
    if len(files) != len(sizes):
        mismatched.append(f"{len(files)} files but {len(sizes)} sizes")
    return MarkerCheck(
        location=location,
        try_number=try_number,
        claimed_rows=claimed,
        listed_files=len(files),
        missing_files=missing,
        size_mismatches=mismatched,
        rows_in_files=rows if readable or not files else None,
    )


def committed_markers(stage_folder: Path) -> list[MarkerCheck]:
    """Every marker under the stage folder (one per committed try), checked, in try order."""
    if not stage_folder.is_dir():
        return []
    checks = [check_marker(marker.parent, stage_folder) for marker in stage_folder.rglob(MARKER)]
    return sorted(checks, key=lambda check: (check.try_number, check.location))


def leftovers(stage_folder: Path) -> list[str]:
    """Uncommitted data left in the stage folder: try folders without a marker, attempts their marker does not
    name, hidden ``.tmp-*`` staging; each as ``<path relative to the stage folder> (<n> files)``."""
    found: list[str] = []
    if not stage_folder.is_dir():
        return found
    for entry in sorted(stage_folder.iterdir()):
        if not entry.is_dir():
            continue
        if entry.name.startswith(".tmp-"):
            found.append(_describe(entry, stage_folder))
        elif _TRY.search(entry.name):
            marker = entry / MARKER
            if not marker.exists():
                found.append(_describe(entry, stage_folder))
                continue
            try:
                named = str(json.loads(marker.read_text(encoding="utf-8")).get("attempt", ""))
            except (OSError, ValueError):
                continue
            for attempt in sorted(entry.iterdir()):
                if attempt.is_dir() and attempt.name != named:
                    found.append(_describe(attempt, stage_folder))
    return found


def _describe(folder: Path, stage_folder: Path) -> str:
    files = sum(1 for path in folder.rglob("*") if path.is_file())
    return f"{folder.relative_to(stage_folder).as_posix()} ({files} files)"


def attempt_progress(try_folder: Path) -> tuple[bool, int]:
    """Whether an attempt folder exists in ``try_folder`` and how many part files are under it so far
    (Spark's task files in ``_temporary`` included; ``.crc`` companions not)."""
    attempts = [path for path in try_folder.glob("attempt-*") if path.is_dir()] if try_folder.is_dir() else []
    if try_folder.parent.is_dir():  # protocol 1 staged beside the outputs
        attempts += [path for path in try_folder.parent.glob(".tmp-*") if path.is_dir()]
    parts = sum(1 for attempt in attempts for path in attempt.rglob("part-*") if path.is_file())
    return bool(attempts), parts
