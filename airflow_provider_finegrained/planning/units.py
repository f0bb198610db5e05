"""Byte quantities written the way Spark users write them ("512m", "2g", "1.5GiB")."""

from __future__ import annotations

import math
import re

_UNITS = {"": 1, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}
_PATTERN = re.compile(r"^\s*(\d+(?:\.\d+)?|\.\d+)\s*([kmgtp]?)(?:i?b)?\s*$", re.IGNORECASE)


def parse_bytes(value: int | float | str, *, what: str = "memory") -> int:
    """Parse a byte quantity; binary units as in Spark (``"512m"`` is 512 MiB). Rejects negatives."""
    if isinstance(value, bool):
        raise ValueError(f"{what} must be a byte count or a size like '512m' or '2g', not {value!r}")
    if isinstance(value, int):
        number: float = value
        multiplier = 1
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{what} must be a finite byte count, not {value!r}")
        number, multiplier = value, 1
    elif isinstance(value, str):
        match = _PATTERN.match(value)
        if match is None:
            if value.strip().startswith("-"):
                raise ValueError(f"{what} must not be negative, got {value!r}")
            raise ValueError(f"{what} must be a byte count or a size like '512m', '2g' or '1.5GiB', not {value!r}")
        number = float(match.group(1))
        multiplier = _UNITS[match.group(2).lower()]
    else:
        raise ValueError(f"{what} must be a byte count or a size like '512m' or '2g', not {value!r}")
    if number < 0:
        raise ValueError(f"{what} must not be negative, got {value!r}")
    return int(number * multiplier)


def format_bytes(n: int | float) -> str:
    """Render a byte count for people: ``1536 -> '1.5 KiB'``."""
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(size) < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def format_mib(n: float) -> str:
    """Render a byte count in MiB as decisions' reasons do (``1.5 MiB``); below 0.1 MiB in bytes."""
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 / 10 else f"{int(n)} B"
