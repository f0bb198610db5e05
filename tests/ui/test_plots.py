"""Plot axes and SVG: power-of-two byte ticks, round linear ticks, points and their tooltips."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from airflow_provider_finegrained.ui.plots import (
    LEFT,
    RIGHT,
    H,
    Point,
    W,
    count_label,
    linear_axis,
    log_bytes_axis,
    nice_step,
    scatter_svg,
)

SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize(
    ("values", "ticks"),
    [
        ([0], ["1 B", "2 B"]),  # zero bytes sit on 1 B; the axis is one step wide
        ([1024], ["1 KiB", "2 KiB"]),
        ([1000, 3000], ["512 B", "1 KiB", "2 KiB", "4 KiB"]),
        # 80 KiB .. 8 MiB: 2^16 .. 2^23 in steps of 2 bits.
        ([80 * 1024, 8 * 1024**2], ["64 KiB", "256 KiB", "1 MiB", "4 MiB", "16 MiB"]),
        # 1 B .. 1 GiB: 30 bits in steps of 10.
        ([0, 1024**3], ["1 B", "1 KiB", "1 MiB", "1 GiB"]),
        ([], ["1 B", "2 B"]),
    ],
)
def test_log_bytes_axis_ticks(values: list[float], ticks: list[str]) -> None:
    axis = log_bytes_axis(values)
    assert [axis.fmt(t) for t in axis.ticks] == ticks
    assert len(axis.ticks) <= 6
    assert all(axis.lo <= max(v, 1) <= axis.hi for v in values)


@pytest.mark.parametrize(
    ("values", "integer", "ticks"),
    [
        ([1], True, [0, 1]),
        ([3], True, [0, 1, 2, 3]),
        ([16], True, [0, 5, 10, 15, 20]),
        ([12.5, 3.2], False, [0, 5, 10, 15]),
        ([0.4], False, [0, 0.1, 0.2, 0.3, 0.4]),
        ([], False, [0, 0.25, 0.5, 0.75, 1.0]),
    ],
)
def test_linear_axis_ticks(values: list[float], integer: bool, ticks: list[float]) -> None:
    assert linear_axis(values, count_label, integer=integer).ticks == pytest.approx(ticks)


@pytest.mark.parametrize(("raw", "step"), [(0, 1), (0.07, 0.1), (3, 5), (2.2, 2.5), (40, 50), (100, 100)])
def test_nice_step(raw: float, step: float) -> None:
    assert nice_step(raw) == pytest.approx(step)


def test_scatter_places_points_and_labels_axes() -> None:
    x = log_bytes_axis([1024, 4096])  # 1 KiB .. 4 KiB
    y = linear_axis([4], count_label, integer=True)  # 0 .. 4
    points = [Point(4096, 4, "run b: P=4"), Point(1024, 1, "run a: P=1")]
    root = ET.fromstring(scatter_svg(points, x, y, "input bytes (log scale)", "decided parallelism", "t"))
    circles = [c for c in root.iter(f"{SVG}circle") if c.get("class") == "point"]
    # Sorted by x; 1 KiB on the left edge, 4 KiB on the right; P=1 a quarter up, P=4 at the top.
    assert [c.find(f"{SVG}title").text for c in circles] == ["run a: P=1", "run b: P=4"]  # type: ignore[union-attr]
    assert float(circles[0].get("cx", "")) == pytest.approx(LEFT, abs=0.1)
    assert float(circles[1].get("cx", "")) == pytest.approx(W - RIGHT, abs=0.1)
    bottom, top = H - 44, 12
    assert float(circles[0].get("cy", "")) == pytest.approx(bottom - (bottom - top) / 4, abs=0.1)
    assert float(circles[1].get("cy", "")) == pytest.approx(top, abs=0.1)
    texts = [t.text for t in root.iter(f"{SVG}text")]
    assert "input bytes (log scale)" in texts and "decided parallelism" in texts
    assert {"1 KiB", "2 KiB", "4 KiB", "0", "4"} <= set(texts)
    assert len([p for p in root.iter(f"{SVG}path")]) == 1  # the line through the points


def test_scatter_without_points_says_so() -> None:
    svg = scatter_svg([], log_bytes_axis([]), linear_axis([], count_label), "x", "y", "t")
    assert "no runs with a trace" in svg and "<circle" not in svg
