"""Small SVG scatter plots with a line through the points: bytes (log scale) against a count or seconds.

Pure Python, no Airflow imports. Zero bytes cannot sit on a log axis: such points are drawn on the
axis' lowest tick (1 B) and their tooltip says 0 B.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from airflow_provider_finegrained.planning.units import format_bytes

W, H = 380, 230
LEFT, RIGHT, TOP, BOTTOM = 58, 26, 12, 44


@dataclass(frozen=True)
class Point:
    x: float
    y: float
    tip: str
    """The point's tooltip (the run it came from and its values)."""


@dataclass(frozen=True)
class Axis:
    lo: float
    hi: float
    log: bool
    ticks: list[float]
    fmt: Callable[[float], str]

    def scale(self, value: float, start: float, end: float) -> float:
        """``value`` mapped onto the pixel range ``start..end``."""
        if self.log:
            v, lo, hi = math.log10(max(value, 1.0)), math.log10(self.lo), math.log10(self.hi)
        else:
            v, lo, hi = value, self.lo, self.hi
        span = hi - lo or 1.0
        return start + (v - lo) / span * (end - start)


def log_bytes_axis(values: Sequence[float]) -> Axis:
    """Powers of two around ``values`` (so ticks read 1 KiB, 32 KiB, 1 MiB), at most 6 ticks, zeros as 1 B."""
    positives = [max(v, 1.0) for v in values] or [1.0]
    lo = math.floor(math.log2(min(positives)))
    hi = math.ceil(math.log2(max(positives)))
    step = next(s for s in (1, 2, 5, 10, 20) if (hi - lo) / s <= 5)
    lo, hi = step * math.floor(lo / step), step * math.ceil(hi / step)
    if hi <= lo:
        hi = lo + step
    ticks = [2.0**k for k in range(lo, hi + 1, step)]
    return Axis(ticks[0], ticks[-1], True, ticks, _bytes_label)


def linear_axis(values: Sequence[float], fmt: Callable[[float], str], integer: bool = False) -> Axis:
    """From 0 to a round number above the largest value, with 4-6 ticks."""
    top = max([v for v in values if v > 0] or [1.0])
    step = nice_step(top / 4)
    if integer:
        step = max(1.0, math.ceil(step))
    hi = step * math.ceil(top / step)
    if hi < top or hi == 0:
        hi += step
    n = round(hi / step)
    return Axis(0.0, hi, False, [i * step for i in range(n + 1)], fmt)


def nice_step(raw: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten that is at least ``raw``."""
    if raw <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * power >= raw - 1e-12:
            return float(m * power)
    return float(10 * power)


def _bytes_label(v: float) -> str:
    return format_bytes(v).replace(".0 ", " ")


def scatter_svg(points: Sequence[Point], x: Axis, y: Axis, x_label: str, y_label: str, title: str) -> str:
    """An SVG plot of ``points`` joined in order of x; each point is a ``circle.point`` with a tooltip."""
    x0, x1, y0, y1 = LEFT, W - RIGHT, H - BOTTOM, TOP
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="plot" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
        f'role="img" aria-label="{escape(title)}">',
        f'<rect x="{x0}" y="{y1}" width="{x1 - x0}" height="{y0 - y1}" fill="#f8fafc" stroke="#cbd5e1"/>',
    ]
    for t in x.ticks:
        px = x.scale(t, x0, x1)
        out.append(f'<line x1="{px:.1f}" y1="{y1}" x2="{px:.1f}" y2="{y0}" stroke="#e2e8f0"/>')
        out.append(
            f'<text x="{px:.1f}" y="{y0 + 14}" font-size="10" text-anchor="middle" fill="#334155">'
            f"{escape(x.fmt(t))}</text>"
        )
    for t in y.ticks:
        py = y.scale(t, y0, y1)
        out.append(f'<line x1="{x0}" y1="{py:.1f}" x2="{x1}" y2="{py:.1f}" stroke="#e2e8f0"/>')
        out.append(
            f'<text x="{x0 - 6}" y="{py + 3:.1f}" font-size="10" text-anchor="end" fill="#334155">'
            f"{escape(y.fmt(t))}</text>"
        )
    out.append(
        f'<text x="{(x0 + x1) / 2:.1f}" y="{H - 8}" font-size="11" text-anchor="middle" fill="#0f172a">'
        f"{escape(x_label)}</text>"
    )
    out.append(
        f'<text x="14" y="{(y0 + y1) / 2:.1f}" font-size="11" text-anchor="middle" fill="#0f172a" '
        f'transform="rotate(-90 14 {(y0 + y1) / 2:.1f})">{escape(y_label)}</text>'
    )
    placed = sorted(((x.scale(p.x, x0, x1), y.scale(p.y, y0, y1), p) for p in points), key=lambda t: t[0])
    if len(placed) > 1:
        path = " ".join(f"{'M' if i == 0 else 'L'} {px:.1f} {py:.1f}" for i, (px, py, _) in enumerate(placed))
        out.append(f'<path d="{path}" fill="none" stroke="#6366f1" stroke-width="1.4" opacity="0.7"/>')
    for px, py, p in placed:
        out.append(
            f'<circle class="point" cx="{px:.1f}" cy="{py:.1f}" r="4.5" fill="#4f46e5" stroke="#ffffff">'
            f"<title>{escape(p.tip)}</title></circle>"
        )
    if not placed:
        out.append(
            f'<text x="{(x0 + x1) / 2:.1f}" y="{(y0 + y1) / 2:.1f}" font-size="12" text-anchor="middle" '
            'fill="#64748b">no runs with a trace</text>'
        )
    out.append("</svg>")
    return "".join(out)


def seconds_label(v: float) -> str:
    return f"{v:g} s"


def count_label(v: float) -> str:
    return f"{v:g}"
