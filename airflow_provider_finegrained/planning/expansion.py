"""A stage's work per byte it consumes, learned from its past runs.

Bytes on disk and the work a stage does differ by a factor that is stable for a stage and differs
between stages (parquet compresses, filters drop rows, joins multiply them). ``decide_region`` takes
a learned factor per stage and decides from ``bytes x work`` instead of the bytes alone; how the
factor is learned (which runs, which Spark metrics, outlier handling) lives with the history.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class LearnedExpansion:
    """Multipliers on a stage's consumed bytes, learned from ``runs`` past runs."""

    work: float
    """Multiplies the consumed bytes before ``bytes / avg_bytes_per_task``."""
    runs: int
    memory: float | None = None
    """In-memory bytes per consumed byte, for the memory floor (None: the cluster profile's)."""

    def __post_init__(self) -> None:
        for name in ("work", "memory"):
            value = getattr(self, name)
            if value is None and name == "memory":
                continue
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
                raise ValueError(f"learned {name} expansion must be a finite number > 0, got {value!r}")
        if isinstance(self.runs, bool) or not isinstance(self.runs, int) or self.runs < 1:
            raise ValueError(f"learned expansion needs runs >= 1, got {self.runs!r}")

    @property
    def rule(self) -> str:
        """How the decision reads when this factor corrected it."""
        return f"bytes x learned expansion {self.work:.3g} ({self.runs} runs) / avg_bytes_per_task"

    def scale(self, size: int) -> int:
        """``size`` consumed bytes as work bytes (rounded up: a non-empty input stays non-empty)."""
        return math.ceil(size * self.work)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
