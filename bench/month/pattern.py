"""The month's daily TPC-H scales: a seeded, recorded pattern (pure; no Spark, no Airflow).

Each day's expected scale is a weekday level growing slowly over the month (the trend), times a weekday
shape (weekends light, Monday's catch-up heavier, the month's last weekday closing the books), times
log-normal noise. One weekday in the second or third week is a spike: 10x its expected scale (a backfill,
a sale). The levels fit this machine: regular days about SF 0.05 to 0.5, the spike about SF 1.

The month is recorded in ``pattern.json`` beside this file (``python -m bench.month.pattern`` writes it);
the benchmark reads that file, and a test checks that the seed still gives it.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import random
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Final

PATTERN_FILE: Final = Path(__file__).resolve().parent / "pattern.json"
SEED: Final = 33
"""The recorded month's seed (issue 33)."""
START: Final = dt.date(2026, 3, 2)
"""The recorded month's first logical date (a Monday)."""
DAYS: Final = 30

LEVEL_START: Final = 0.08
"""A plain weekday's expected scale on the first day."""
TREND: Final = 2.5
"""How much a plain weekday's expected scale grows over the month (x2.5, exponentially)."""
WEEKDAY_SHAPE: Final = (1.3, 1.0, 1.0, 1.05, 0.9, 0.55, 0.5)
"""Monday to Sunday: Monday catches up on the weekend, Saturday and Sunday are light."""
MONTH_END: Final = 1.6
"""The month's last weekday closes the books."""
NOISE_SIGMA: Final = 0.15
"""Log-normal noise on every day."""
SPIKE: Final = 10.0
SMALLEST: Final = 0.05
"""No day below this scale (the noise is clipped)."""


@dataclass(frozen=True)
class Day:
    """One day of the month: its logical date and TPC-H scale factor."""

    index: int
    date: str
    """The logical date, ISO (``2026-03-02``)."""
    weekday: str
    expected: float
    """Trend x weekday shape, before noise and spike."""
    scale: float
    spike: bool


def expected_scale(start: dt.date, index: int, days: int = DAYS) -> float:
    """Day ``index``'s expected scale: the trend's level times the weekday's shape (the month end's too)."""
    date = start + dt.timedelta(days=index)
    level = LEVEL_START * float(TREND ** (index / (days - 1)))
    shape = WEEKDAY_SHAPE[date.weekday()]
    if index == last_weekday(start, days):
        shape *= MONTH_END
    return level * shape


def last_weekday(start: dt.date, days: int = DAYS) -> int:
    """The index of the month's last Monday-to-Friday day."""
    return max(i for i in range(days) if (start + dt.timedelta(days=i)).weekday() < 5)


def generate(seed: int = SEED, start: dt.date = START, days: int = DAYS) -> list[Day]:
    """The month: ``days`` days from ``start``, noise and the spike's day drawn from ``seed``."""
    rng = random.Random(seed)
    noise = [math.exp(rng.gauss(0.0, NOISE_SIGMA)) for _ in range(days)]
    candidates = [i for i in range(7, min(21, days)) if (start + dt.timedelta(days=i)).weekday() in (1, 2, 3)]
    spike_day = rng.choice(candidates)
    out = []
    for i in range(days):
        date = start + dt.timedelta(days=i)
        expected = expected_scale(start, i, days)
        scale = expected * SPIKE if i == spike_day else max(SMALLEST, expected * noise[i])
        out.append(Day(i, date.isoformat(), date.strftime("%a"), round(expected, 4), round(scale, 2), i == spike_day))
    return out


def to_document(days: Sequence[Day], seed: int = SEED) -> dict[str, Any]:
    """What ``pattern.json`` holds: how the month was made and its days."""
    return {
        "seed": seed,
        "generator": "bench/month/pattern.py",
        "shape": {
            "level_start": LEVEL_START,
            "trend": TREND,
            "weekday_shape": list(WEEKDAY_SHAPE),
            "month_end": MONTH_END,
            "noise_sigma": NOISE_SIGMA,
            "spike": SPIKE,
        },
        "days": [asdict(d) for d in days],
    }


def render(days: Sequence[Day], seed: int = SEED) -> str:
    return json.dumps(to_document(days, seed), indent=1) + "\n"


def load(path: Path = PATTERN_FILE) -> list[Day]:
    """The recorded month."""
    return [Day(**d) for d in json.loads(path.read_text())["days"]]


def by_date(days: Sequence[Day]) -> dict[str, Day]:
    return {d.date: d for d in days}


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m bench.month.pattern [--check]``: write pattern.json from the seed, or check it is unchanged."""
    args = list(sys.argv[1:] if argv is None else argv)
    text = render(generate())
    if args == ["--check"]:
        same = PATTERN_FILE.is_file() and PATTERN_FILE.read_text() == text
        print("pattern.json is what the seed gives" if same else "pattern.json differs from what the seed gives")
        return 0 if same else 1
    PATTERN_FILE.write_text(text)
    print(f"wrote {PATTERN_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
