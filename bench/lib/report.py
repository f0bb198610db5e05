"""What every result file records, and writing them: the machine, the command, JSON and Markdown."""

from __future__ import annotations

import json
import os
import platform
import shlex
import subprocess
import sys
import time
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any


def command_line(experiment: str, argv: Sequence[str] | None) -> str:
    """The command that ran ``experiment`` with ``argv`` (None: this process's arguments), as the results quote it."""
    args = list(sys.argv[1:] if argv is None else argv)
    return " ".join(["python -m bench", experiment, *([shlex.join(args)] if args else [])])


def load_1m() -> float:
    """The machine's 1-minute load average now, rounded (other work on a shared machine stretches every figure)."""
    return round(os.getloadavg()[0], 2)


def version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def java_version() -> str:
    try:
        return subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=60).stderr.splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "unknown"


def machine_brief(load_average_1m: list[float]) -> dict[str, Any]:
    """Cores, Python and platform, and the load averages given (when the run started and ended)."""
    return {
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "load_average_1m": load_average_1m,
    }


def machine_info() -> dict[str, Any]:
    """Cores, memory, OS, Python, Java, PySpark and Airflow versions, load and date of this run."""
    import psutil

    return {
        "cpus": os.cpu_count(),
        "usable_cpus": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "memory_bytes": psutil.virtual_memory().total,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "java": java_version(),
        "pyspark": version("pyspark"),
        "airflow": version("apache-airflow"),
        "load_avg_1m_at_end": load_1m(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }


def write_json(path: Path, doc: Any, *, indent: int = 2) -> Path:
    """``doc`` as JSON (anything JSON lacks as its ``str``) in ``path``, its folder created."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=indent, default=str) + "\n")
    return path


def write_results(json_path: Path, doc: Any, markdown: str | None = None, *, indent: int = 2) -> list[Path]:
    """An experiment's result files: ``doc`` as JSON in ``json_path`` and, if given, ``markdown`` beside it (.md).

    Written after every run by the long experiments, so a run stopped part-way keeps what it measured."""
    paths = [write_json(json_path, doc, indent=indent)]
    if markdown is not None:
        paths.append(json_path.with_suffix(".md"))
        paths[-1].write_text(markdown)
    return paths
