"""The JIT's rule from measurements: pairing each region's rounds and finding where C1 alone stops paying."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.cold_start_jit import Boundary, RegionPoint, boundary, points, table

MiB = 2**20


def run(variant: str, regions: dict[str, tuple[int, float]], ok: bool = True) -> dict[str, Any]:
    found = {name: {"read_per_slot": read, "submit_s": s} for name, (read, s) in regions.items()}
    return {"variant": variant, "ok": ok, "regions": found}


def test_points_pair_each_regions_median_under_both_jits_and_skip_failed_runs() -> None:
    runs = [
        run("jit-c1", {"scan": (100, 10.0), "join": (5, 4.0)}),
        run("jit-tiered", {"scan": (100, 12.0), "join": (5, 5.0)}),
        run("jit-tiered", {"scan": (100, 14.0), "join": (5, 6.0)}),
        run("jit-c1", {"scan": (100, 20.0), "join": (5, 99.0)}, ok=False),
        run("jit-c1", {"scan": (100, 12.0), "join": (5, 4.0)}),
        run("provider", {"scan": (100, 1.0)}),
    ]
    assert points("1", runs) == [
        RegionPoint("1", "join", 5, 4.0, 5.5),
        RegionPoint("1", "scan", 100, 11.0, 13.0),
    ]


def test_a_region_measured_under_one_jit_only_gives_no_point() -> None:
    assert points("1", [run("jit-c1", {"scan": (100, 10.0)})]) == []


def point(read_mib: float, c1: float, tiered: float) -> RegionPoint:
    return RegionPoint("x", "r", int(read_mib * MiB), c1, tiered)


@pytest.mark.parametrize(
    ("found", "expected"),
    [
        pytest.param([], Boundary(None, None, 0.03), id="nothing-measured"),
        pytest.param([point(1, 9, 10), point(50, 20, 21)], Boundary(50 * MiB, None, 0.03), id="c1-never-loses"),
        pytest.param(
            [point(1, 9, 10), point(50, 20, 21), point(200, 40, 35)],
            Boundary(50 * MiB, 200 * MiB, 0.03),
            id="loses-at-the-big-one",
        ),
        # 3% slower is within the tolerance; 3.1% is not.
        pytest.param([point(10, 10.3, 10), point(20, 10.31, 10)], Boundary(10 * MiB, 20 * MiB, 0.03), id="edge"),
        # A small region that loses sets the edge even when a bigger one wins (noise or not, C1 is not safe there).
        pytest.param([point(0, 12, 10), point(100, 8, 10)], Boundary(None, 0, 0.03), id="loses-at-zero-bytes"),
        pytest.param(
            [point(5, 9, 10), point(30, 11, 10), point(60, 9, 10)],
            Boundary(5 * MiB, 30 * MiB, 0.03),
            id="first-loss-wins",
        ),
    ],
)
def test_boundary(found: list[RegionPoint], expected: Boundary) -> None:
    assert boundary(found) == expected


def test_table_reads_the_files_and_writes_the_rule(tmp_path: Path) -> None:
    small = {"scale": "0.01", "runs": [run("jit-c1", {"a": (MiB, 9.0)}), run("jit-tiered", {"a": (MiB, 10.0)})]}
    big = {
        "scale": "10",
        "runs": [run("jit-c1", {"a": (500 * MiB, 90.0)}), run("jit-tiered", {"a": (500 * MiB, 80.0)})],
    }
    (tmp_path / "s.json").write_text(json.dumps(small))
    (tmp_path / "b.json").write_text(json.dumps(big))
    doc = table(tmp_path, ["s", "b"])
    assert doc["boundary"] == {"c1_holds_to": MiB, "c1_loses_from": 500 * MiB, "tolerance": 0.03}
    text = (tmp_path / "cold_start_jit.md").read_text()
    assert "| 10 | a | 500.0 MiB | 90.0 | 80.0 | 1.12 |" in text and "the first slower at 500.0 MiB" in text


def test_files_of_one_scale_are_rounds_of_one_measurement(tmp_path: Path) -> None:
    first = {"scale": "10", "runs": [run("jit-c1", {"a": (MiB, 10.0)}), run("jit-tiered", {"a": (MiB, 20.0)})]}
    second = {"scale": "10", "runs": [run("jit-tiered", {"a": (MiB, 30.0)}), run("jit-c1", {"a": (MiB, 14.0)})]}
    (tmp_path / "one.json").write_text(json.dumps(first))
    (tmp_path / "two.json").write_text(json.dumps(second))
    assert table(tmp_path, ["one", "two"])["points"] == [
        {"scale": "10", "region": "a", "read_per_slot": MiB, "c1_s": 12.0, "tiered_s": 25.0}
    ]
