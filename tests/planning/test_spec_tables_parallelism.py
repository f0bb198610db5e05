"""Hand-worked specification tables for the parallelism half of the planning core.

Covers ParallelismConfig validation, decide_parallelism (FLIP-187's decider),
ResourceSpec parsing and managed_memory_fractions. Every expected value was worked out by hand
from the written specification; the arithmetic is in the comments.

Notation: V = avg_bytes_per_task, nb = non-broadcast bytes, b = broadcast bytes,
capped = min(b, max_broadcast_ratio * V), p = ceil(nb / (V - capped)), then clamp to [min, max].
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from airflow_provider_finegrained.planning import (
    ConsumedResult,
    ParallelismConfig,
    ResourceSpec,
    decide_parallelism,
    managed_memory_fractions,
)

CR = ConsumedResult
KI = 2**10
MI = 2**20
GI = 2**30
TI = 2**40
V100: dict[str, Any] = {"avg_bytes_per_task": 100}
POW2: dict[str, Any] = {"avg_bytes_per_task": 100, "normalize": "power_of_two"}


# ---------------------------------------------------------------------------------------------
# ParallelismConfig validation
# ---------------------------------------------------------------------------------------------

INVALID_CONFIGS = [
    pytest.param(
        {**V100, "min_parallelism": 10, "max_parallelism": 5},
        ("min_parallelism", "max_parallelism"),
        id="min-above-max",
    ),
    pytest.param({**V100, "min_parallelism": 0}, ("min_parallelism",), id="min-zero"),
    pytest.param({**V100, "min_parallelism": -3}, ("min_parallelism",), id="min-negative"),
    pytest.param({"avg_bytes_per_task": 0}, ("avg_bytes_per_task",), id="avg-zero"),
    pytest.param({"avg_bytes_per_task": -5}, ("avg_bytes_per_task",), id="avg-negative"),
    pytest.param({"avg_bytes_per_task": "0m"}, ("avg_bytes_per_task",), id="avg-zero-human-string"),
    pytest.param({**V100, "max_broadcast_ratio": 1.0}, ("max_broadcast_ratio",), id="ratio-one"),
    pytest.param({**V100, "max_broadcast_ratio": 1.5}, ("max_broadcast_ratio",), id="ratio-above-one"),
    pytest.param({**V100, "max_broadcast_ratio": -0.1}, ("max_broadcast_ratio",), id="ratio-negative"),
    pytest.param({**V100, "normalize": "nearest_ten"}, ("normalize",), id="unknown-normalize"),
]


@pytest.mark.parametrize(("kwargs", "names"), INVALID_CONFIGS)
def test_invalid_config_names_setting(kwargs: dict[str, Any], names: tuple[str, ...]) -> None:
    with pytest.raises(ValueError) as info:
        ParallelismConfig(**kwargs)
    msg = str(info.value)
    for name in names:
        assert name in msg, (name, msg)


@pytest.mark.parametrize(
    "kwargs",
    [
        # 5, 6, 7 contain no power of two (4 < 5, 8 > 7).
        pytest.param({**POW2, "min_parallelism": 5, "max_parallelism": 7}, id="pow2-none-in-5-7"),
        pytest.param({**POW2, "min_parallelism": 9, "max_parallelism": 15}, id="pow2-none-in-9-15"),
    ],
)
def test_power_of_two_without_power_in_bounds_is_invalid(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=r"normalize|power_of_two|min_parallelism|max_parallelism"):
        ParallelismConfig(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        pytest.param({**V100}, id="defaults"),
        pytest.param({**V100, "min_parallelism": 5, "max_parallelism": 5}, id="min-equals-max"),
        pytest.param({**V100, "max_broadcast_ratio": 0}, id="ratio-zero-valid"),
        pytest.param({**V100, "max_broadcast_ratio": 0.99}, id="ratio-just-below-one"),
        pytest.param({**V100, "normalize": "none"}, id="normalize-none"),
        pytest.param({**POW2, "min_parallelism": 4, "max_parallelism": 4}, id="pow2-single-power"),
        pytest.param({**POW2, "min_parallelism": 3, "max_parallelism": 5}, id="pow2-four-inside-3-5"),
        pytest.param({"avg_bytes_per_task": "64m"}, id="avg-human-string"),
        pytest.param({**V100, "default_source_parallelism": 3}, id="with-source-default"),
    ],
)
def test_valid_configs_construct(kwargs: dict[str, Any]) -> None:
    config = ParallelismConfig(**kwargs)
    assert config.min_parallelism == kwargs.get("min_parallelism", 1)
    assert config.max_parallelism == kwargs.get("max_parallelism", 128)


@pytest.mark.parametrize(
    ("avg", "nb", "expected"),
    [
        # "64m" = 64 * 2**20 = V; 3V -> exactly 3; 3V + 1 -> ceil(3.0000...) = 4.
        pytest.param("64m", 3 * 64 * MI, 3, id="64m-exact-3V"),
        pytest.param("64m", 3 * 64 * MI + 1, 4, id="64m-3V-plus-one"),
        # "1k" = 1024: 4096 -> 4; 4097 -> 5.
        pytest.param("1k", 4096, 4, id="1k-exact-4V"),
        pytest.param("1k", 4097, 5, id="1k-4V-plus-one"),
        pytest.param(64 * MI, 3 * 64 * MI, 3, id="int-same-as-64m"),
    ],
)
def test_avg_bytes_per_task_human_string(avg: str | int, nb: int, expected: int) -> None:
    config = ParallelismConfig(avg_bytes_per_task=avg)
    assert decide_parallelism([CR([nb])], config) == expected


# ---------------------------------------------------------------------------------------------
# decide_parallelism
# ---------------------------------------------------------------------------------------------

DECIDE_CASES = [
    # --- zero bytes / broadcast only -> minimum
    pytest.param([CR([0, 0, 0])], {**V100}, 1, id="zero-bytes-min-1"),
    pytest.param([CR([0, 0, 0])], {**V100, "min_parallelism": 3}, 3, id="zero-bytes-min-3"),
    pytest.param([CR([])], {**V100, "min_parallelism": 2}, 2, id="no-partitions-gives-min"),
    # nb = 0 -> p = ceil(0 / 50) = 0 -> clamp to min.
    pytest.param([CR([500], broadcast=True)], {**V100}, 1, id="only-broadcast-min-1"),
    pytest.param(
        [CR([500], broadcast=True), CR([70], broadcast=True)],
        {**V100, "min_parallelism": 2},
        2,
        id="only-broadcast-min-2",
    ),
    # --- broadcast cap. V=100, ratio 0.5 -> cap 50.
    # nb=300, b=20 < 50 -> capped 20 -> ceil(300/80) = ceil(3.75) = 4.
    pytest.param([CR([100, 200]), CR([20], broadcast=True)], {**V100}, 4, id="broadcast-below-cap"),
    # nb=300, b=200 > 50 -> capped 50 -> ceil(300/50) = 6.
    pytest.param([CR([300]), CR([200], broadcast=True)], {**V100}, 6, id="broadcast-above-cap"),
    # b=50 exactly the cap -> 300/50 = 6; nb=301 -> ceil(6.02) = 7.
    pytest.param([CR([300]), CR([50], broadcast=True)], {**V100}, 6, id="broadcast-at-cap"),
    pytest.param([CR([301]), CR([50], broadcast=True)], {**V100}, 7, id="broadcast-at-cap-plus-one"),
    # ratio 0 -> capped = min(200, 0) = 0 -> ceil(300/100) = 3.
    pytest.param(
        [CR([300]), CR([200], broadcast=True)],
        {**V100, "max_broadcast_ratio": 0},
        3,
        id="ratio-zero-ignores-broadcast",
    ),
    # ratio 0.25 -> cap 25 -> capped 25 -> ceil(300/75) = 4.
    pytest.param(
        [CR([300]), CR([200], broadcast=True)],
        {**V100, "max_broadcast_ratio": 0.25},
        4,
        id="ratio-quarter",
    ),
    # --- several results summed
    # nb = 100+50+70+30+1 = 251 -> ceil(2.51) = 3.
    pytest.param([CR([100, 50]), CR([70, 30, 1])], {**V100}, 3, id="several-results-summed"),
    # nb = 300, b = 10+15 = 25 <= 50 -> capped 25 -> ceil(300/75) = 4.
    pytest.param(
        [CR([150, 150]), CR([10], broadcast=True), CR([15], broadcast=True)],
        {**V100},
        4,
        id="several-broadcast-summed-below-cap",
    ),
    # b = 35+20 = 55 > 50 -> capped 50 -> ceil(300/50) = 6 (taking only the largest, 35, would give
    # ceil(300/65) = 5).
    pytest.param(
        [CR([150, 150]), CR([35], broadcast=True), CR([20], broadcast=True)],
        {**V100},
        6,
        id="several-broadcast-summed-above-cap",
    ),
    # --- one huge partition
    # nb = 1 + 1 + 9998 = 10000 -> 100 (inside max 128).
    pytest.param([CR([1, 1, 9_998])], {**V100}, 100, id="one-huge-partition"),
    # nb = 1_000_000 -> 10000 -> clamp 128.
    pytest.param([CR([1_000_000])], {**V100}, 128, id="one-huge-partition-clipped"),
    pytest.param([CR([1])], {**V100}, 1, id="one-byte"),
    # --- bounds clip
    # nb=150 -> ceil(1.5) = 2 -> clamp up to 5.
    pytest.param([CR([150])], {**V100, "min_parallelism": 5}, 5, id="clip-at-min"),
    # nb=10000 -> 100 -> clamp down to 16.
    pytest.param([CR([10_000])], {**V100, "max_parallelism": 16}, 16, id="clip-at-max"),
    pytest.param([CR([10_000])], {**V100, "min_parallelism": 7, "max_parallelism": 7}, 7, id="min-eq-max-high"),
    pytest.param([CR([100])], {**V100, "min_parallelism": 7, "max_parallelism": 7}, 7, id="min-eq-max-low"),
    pytest.param([CR([0])], {**V100, "min_parallelism": 7, "max_parallelism": 7}, 7, id="min-eq-max-zero"),
    # --- exact multiples of V
    pytest.param([CR([400])], {**V100}, 4, id="exact-4V"),
    pytest.param([CR([401])], {**V100}, 5, id="4V-plus-one"),
    pytest.param([CR([399])], {**V100}, 4, id="4V-minus-one"),
    pytest.param([CR([100, 100, 100, 100])], {**V100}, 4, id="exact-4V-in-four-partitions"),
    # V - capped = 100 - 50 = 50: nb=200 -> 4 exactly; nb=201 -> ceil(4.02) = 5.
    pytest.param([CR([200]), CR([60], broadcast=True)], {**V100}, 4, id="exact-multiple-after-cap"),
    pytest.param([CR([201]), CR([60], broadcast=True)], {**V100}, 5, id="multiple-after-cap-plus-one"),
    # --- sources: no consumed results
    pytest.param([], {**V100, "default_source_parallelism": 7}, 7, id="source-with-default"),
    pytest.param([], {**V100}, 128, id="source-without-default-gets-max"),
    pytest.param([], {**V100, "max_parallelism": 40}, 40, id="source-without-default-custom-max"),
    # "returned as given (never normalized, never clamped)"
    pytest.param([], {**V100, "default_source_parallelism": 500}, 500, id="source-default-above-max-not-clamped"),
    pytest.param(
        [],
        {**V100, "min_parallelism": 4, "default_source_parallelism": 1},
        1,
        id="source-default-below-min-not-clamped",
    ),
    pytest.param([], {**POW2, "default_source_parallelism": 3}, 3, id="source-default-not-normalized"),
    # max 100 is not a power of two, but the source takes max_parallelism as given.
    pytest.param([], {**POW2, "max_parallelism": 100}, 100, id="source-max-not-normalized"),
    # --- power_of_two normalisation (V=100, bounds [1, 128] unless stated)
    pytest.param([CR([100])], {**POW2}, 1, id="pow2-p1"),
    pytest.param([CR([200])], {**POW2}, 2, id="pow2-p2"),
    pytest.param([CR([300])], {**POW2}, 4, id="pow2-p3-tie-up-to-4"),
    pytest.param([CR([400])], {**POW2}, 4, id="pow2-p4"),
    # 401 -> ceil(4.01) = 5 -> |5-4| = 1 < |8-5| = 3 -> 4.
    pytest.param([CR([401])], {**POW2}, 4, id="pow2-p5-down-to-4"),
    pytest.param([CR([600])], {**POW2}, 8, id="pow2-p6-tie-up-to-8"),
    pytest.param([CR([700])], {**POW2}, 8, id="pow2-p7"),
    # 11: |11-8| = 3 < |16-11| = 5 -> 8.
    pytest.param([CR([1100])], {**POW2}, 8, id="pow2-p11-down-to-8"),
    # 12: |12-8| = 4 = |16-12| -> tie goes up -> 16.
    pytest.param([CR([1200])], {**POW2}, 16, id="pow2-p12-tie-up-to-16"),
    # 23: |23-16| = 7 < |32-23| = 9 -> 16 (a geometric midpoint sqrt(16*32) = 22.6 would give 32).
    pytest.param([CR([2300])], {**POW2}, 16, id="pow2-p23-nearer-is-16"),
    # 47: |47-32| = 15 < |64-47| = 17 -> 32 (geometric midpoint 45.25 would give 64).
    pytest.param([CR([4700])], {**POW2}, 32, id="pow2-p47-nearer-is-32"),
    # 48: |48-32| = 16 = |64-48| -> tie up -> 64.
    pytest.param([CR([4800])], {**POW2}, 64, id="pow2-p48-tie-up-to-64"),
    # 100: |100-64| = 36 > |128-100| = 28 -> 128.
    pytest.param([CR([10_000])], {**POW2}, 128, id="pow2-p100-up-to-128"),
    # 200 -> 256 -> clamp 128.
    pytest.param([CR([20_000])], {**POW2}, 128, id="pow2-p200-clamped-128"),
    # broadcast + normalize: ceil(300/50) = 6 -> tie -> 8.
    pytest.param([CR([300]), CR([200], broadcast=True)], {**POW2}, 8, id="pow2-with-broadcast"),
    pytest.param([CR([0])], {**POW2}, 1, id="pow2-zero-bytes-min-1"),
    # min 3 rounds up to 4.
    pytest.param([CR([0])], {**POW2, "min_parallelism": 3}, 4, id="pow2-zero-bytes-min-3-gives-4"),
    # min 5 rounds up to 8.
    pytest.param([CR([0])], {**POW2, "min_parallelism": 5}, 8, id="pow2-zero-bytes-min-5-gives-8"),
    # p=1 -> 1 -> clamp to rounded min 8 (clamping to raw 5 and then rounding would give 4).
    pytest.param([CR([100])], {**POW2, "min_parallelism": 5}, 8, id="pow2-min-5-rounded-up-to-8"),
    # max 48 rounds down to 32. p=100 -> 128 -> clamp 32 (clamping to raw 48 first, then rounding the
    # tie 48 upward, would give 64, which is above max).
    pytest.param([CR([10_000])], {**POW2, "max_parallelism": 48}, 32, id="pow2-max-48-rounded-to-32"),
    # bounds [3, 100] -> [4, 64]: p=100 -> 128 -> clamp 64; p=3 -> 4; p=1 -> 1 -> clamp 4.
    pytest.param(
        [CR([10_000])],
        {**POW2, "min_parallelism": 3, "max_parallelism": 100},
        64,
        id="pow2-bounds-3-100-high",
    ),
    pytest.param([CR([300])], {**POW2, "min_parallelism": 3, "max_parallelism": 100}, 4, id="pow2-bounds-3-100-mid"),
    pytest.param([CR([100])], {**POW2, "min_parallelism": 3, "max_parallelism": 100}, 4, id="pow2-bounds-3-100-low"),
    # bounds [5, 40] -> [8, 32]: p=30 -> |30-32| = 2 < 14 -> 32; p=23 -> 16.
    pytest.param([CR([3000])], {**POW2, "min_parallelism": 5, "max_parallelism": 40}, 32, id="pow2-bounds-5-40-p30"),
    pytest.param([CR([2300])], {**POW2, "min_parallelism": 5, "max_parallelism": 40}, 16, id="pow2-bounds-5-40-p23"),
    pytest.param([CR([10_000])], {**POW2, "min_parallelism": 4, "max_parallelism": 4}, 4, id="pow2-min-eq-max-4"),
]


@pytest.mark.parametrize(("consumed", "kwargs", "expected"), DECIDE_CASES)
def test_decide_parallelism_table(consumed: list[ConsumedResult], kwargs: dict[str, Any], expected: int) -> None:
    assert decide_parallelism(consumed, ParallelismConfig(**kwargs)) == expected


# ---------------------------------------------------------------------------------------------
# ResourceSpec
# ---------------------------------------------------------------------------------------------

MEMORY_PARSE_CASES = [
    pytest.param("heap_memory", "512m", 512 * MI, id="512m"),
    pytest.param("heap_memory", "512M", 512 * MI, id="512M-upper"),
    pytest.param("heap_memory", "2g", 2 * GI, id="2g"),
    pytest.param("heap_memory", "2G", 2 * GI, id="2G-upper"),
    pytest.param("heap_memory", "2gb", 2 * GI, id="2gb"),
    pytest.param("heap_memory", "2GB", 2 * GI, id="2GB-upper"),
    pytest.param("heap_memory", "2GiB", 2 * GI, id="2GiB"),
    pytest.param("heap_memory", "2 g", 2 * GI, id="2-space-g"),
    # 1.5 * 2**30 = 1_610_612_736.
    pytest.param("heap_memory", "1.5g", 1_610_612_736, id="1.5g"),
    pytest.param("heap_memory", "100k", 102_400, id="100k"),
    pytest.param("heap_memory", "100KiB", 102_400, id="100KiB"),
    pytest.param("heap_memory", "1t", TI, id="1t"),
    pytest.param("heap_memory", "512mb", 512 * MI, id="512mb"),
    pytest.param("heap_memory", 1000, 1000, id="plain-int-bytes"),
    pytest.param("heap_memory", "1000", 1000, id="digit-string-bytes"),
    pytest.param("heap_memory", 0, 0, id="zero-int"),
    pytest.param("heap_memory", "0", 0, id="zero-string"),
    pytest.param("off_heap_memory", "256m", 256 * MI, id="off-heap-256m"),
    pytest.param("off_heap_memory", 4096, 4096, id="off-heap-int"),
    pytest.param("managed_memory", "1g", GI, id="managed-1g"),
    pytest.param("managed_memory", "3 GB", 3 * GI, id="managed-3-space-GB"),
    pytest.param("managed_memory", "64", 64, id="managed-digit-string"),
]


@pytest.mark.parametrize(("field", "value", "expected"), MEMORY_PARSE_CASES)
def test_resource_spec_memory_parsing(field: str, value: str | int, expected: int) -> None:
    kwargs: dict[str, Any] = {"cpu_cores": 1.0, "heap_memory": 0, field: value}
    spec = ResourceSpec(**kwargs)
    assert getattr(spec, field) == expected


def test_resource_spec_defaults_and_cpu() -> None:
    spec = ResourceSpec(0.5, "1g")
    assert spec.cpu_cores == 0.5
    assert spec.heap_memory == GI
    assert spec.off_heap_memory == 0
    assert spec.managed_memory == 0
    assert spec.gpus == 0


def test_resource_spec_positional_order() -> None:
    spec = ResourceSpec(2, "1g", "2g", "3g", 1)
    assert (spec.cpu_cores, spec.heap_memory, spec.off_heap_memory, spec.managed_memory, spec.gpus) == (
        2,
        GI,
        2 * GI,
        3 * GI,
        1,
    )


INVALID_RESOURCE_CASES = [
    pytest.param({"cpu_cores": 0, "heap_memory": "1g"}, id="cpu-zero"),
    pytest.param({"cpu_cores": -1, "heap_memory": "1g"}, id="cpu-negative"),
    pytest.param({"cpu_cores": 1, "heap_memory": -1}, id="heap-negative-int"),
    pytest.param({"cpu_cores": 1, "heap_memory": "-1m"}, id="heap-negative-string"),
    pytest.param({"cpu_cores": 1, "heap_memory": 0, "off_heap_memory": -5}, id="off-heap-negative"),
    pytest.param({"cpu_cores": 1, "heap_memory": 0, "managed_memory": -1}, id="managed-negative"),
    pytest.param({"cpu_cores": 1, "heap_memory": 0, "gpus": -1}, id="gpus-negative"),
    pytest.param({"cpu_cores": 1, "heap_memory": "lots"}, id="heap-garbage"),
    pytest.param({"cpu_cores": 1, "heap_memory": 0, "managed_memory": "12 parsecs"}, id="managed-garbage"),
    pytest.param({"cpu_cores": 1, "heap_memory": "g"}, id="unit-without-number"),
    pytest.param({"cpu_cores": 1, "heap_memory": ""}, id="empty-string"),
]


@pytest.mark.parametrize("kwargs", INVALID_RESOURCE_CASES)
def test_resource_spec_invalid(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        ResourceSpec(**kwargs)


# ---------------------------------------------------------------------------------------------
# managed_memory_fractions
# ---------------------------------------------------------------------------------------------


def spec(managed: str | int) -> ResourceSpec:
    return ResourceSpec(1.0, "1g", managed_memory=managed)


FRACTION_CASES = [
    # 1g / (1g + 3g) = 0.25, 3g / 4g = 0.75.
    pytest.param(
        {"a": spec("1g"), "b": spec("3g")},
        {"a": "g1", "b": "g1"},
        None,
        {"a": 0.25, "b": 0.75},
        id="specified-1-to-3",
    ),
    pytest.param(
        {"a": spec("256m"), "b": spec("768m")},
        {"a": "g1", "b": "g1"},
        None,
        {"a": 0.25, "b": 0.75},
        id="specified-human-strings",
    ),
    pytest.param(
        {"a": spec("1g"), "b": spec("3g")},
        {"a": "g1", "b": "g2"},
        None,
        {"a": 1.0, "b": 1.0},
        id="specified-separate-groups",
    ),
    pytest.param(
        {"a": spec(0), "b": spec(0)},
        {"a": "g1", "b": "g1"},
        None,
        {"a": 0.0, "b": 0.0},
        id="specified-group-sum-zero",
    ),
    pytest.param(
        {"a": spec(0), "b": spec("1g")},
        {"a": "g1", "b": "g1"},
        None,
        {"a": 0.0, "b": 1.0},
        id="specified-one-zero",
    ),
    pytest.param(
        {"a": spec("1g"), "b": spec("1g"), "c": spec("1g")},
        {"a": "g", "b": "g", "c": "g"},
        None,
        {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3},
        id="specified-thirds",
    ),
    # weights only apply to unknown stages: specified group still 1g/4g, 3g/4g.
    pytest.param(
        {"a": spec("1g"), "b": spec("3g")},
        {"a": "g1", "b": "g1"},
        {"a": 100.0},
        {"a": 0.25, "b": 0.75},
        id="specified-ignores-weights",
    ),
    pytest.param(
        {"a": None, "b": None, "c": None},
        {"a": "g", "b": "g", "c": "g"},
        None,
        {"a": 1 / 3, "b": 1 / 3, "c": 1 / 3},
        id="unknown-thirds",
    ),
    pytest.param({"solo": None}, {"solo": "g"}, None, {"solo": 1.0}, id="unknown-single"),
    # weight a = 2, b and c default 1: 2/4, 1/4, 1/4.
    pytest.param(
        {"a": None, "b": None, "c": None},
        {"a": "g", "b": "g", "c": "g"},
        {"a": 2.0},
        {"a": 0.5, "b": 0.25, "c": 0.25},
        id="unknown-weights-missing-weigh-one",
    ),
    # 3 / (3+1+1) = 0.6, 1/5 = 0.2.
    pytest.param(
        {"a": None, "b": None, "c": None},
        {"a": "g", "b": "g", "c": "g"},
        {"a": 3.0, "b": 1.0},
        {"a": 0.6, "b": 0.2, "c": 0.2},
        id="unknown-weights-fifths",
    ),
    # Unknown groups are independent: g1 weights 1, 1 -> 0.5 each; g2 weights 3, 1 -> 0.75, 0.25.
    pytest.param(
        {"a": None, "b": None, "c": None, "d": None},
        {"a": "g1", "b": "g1", "c": "g2", "d": "g2"},
        {"c": 3.0},
        {"a": 0.5, "b": 0.5, "c": 0.75, "d": 0.25},
        id="unknown-two-groups-independent",
    ),
    pytest.param({}, {}, None, {}, id="empty"),
]


def _assert_group_sums_at_most_one(result: dict[str, float], groups: dict[str, str]) -> None:
    by_group: dict[str, list[float]] = {}
    for stage in sorted(result):
        by_group.setdefault(groups[stage], []).append(result[stage])
    for fractions in by_group.values():
        assert sum(fractions) <= 1.0
        assert math.fsum(fractions) <= 1.0


@pytest.mark.parametrize(("specs", "groups", "weights", "expected"), FRACTION_CASES)
def test_managed_memory_fractions_table(
    specs: dict[str, ResourceSpec | None],
    groups: dict[str, str],
    weights: dict[str, float] | None,
    expected: dict[str, float],
) -> None:
    if weights is None:
        result = managed_memory_fractions(specs, groups)
    else:
        result = managed_memory_fractions(specs, groups, weights)
    assert set(result) == set(expected)
    for stage, value in expected.items():
        assert result[stage] == pytest.approx(value, rel=1e-12, abs=1e-15), stage
    _assert_group_sums_at_most_one(result, groups)


@pytest.mark.parametrize(
    ("n", "specified"),
    [
        pytest.param(3, False, id="3-unknown"),
        # naive 1/9 summed nine times is 1.0000000000000002 in floating point.
        pytest.param(9, False, id="9-unknown"),
        pytest.param(11, False, id="11-unknown"),
        pytest.param(9, True, id="9-specified-equal"),
        pytest.param(21, True, id="21-specified-equal"),
    ],
)
def test_managed_memory_fractions_never_exceed_one(n: int, specified: bool) -> None:
    stages = [f"s{i:02d}" for i in range(n)]
    specs: dict[str, ResourceSpec | None] = {s: (spec("1g") if specified else None) for s in stages}
    groups = {s: "shared" for s in stages}
    result = managed_memory_fractions(specs, groups)
    values = [result[s] for s in stages]
    for v in values:
        assert v == pytest.approx(1 / n, rel=1e-9)
    assert sum(values) <= 1.0
    assert sum(sorted(values)) <= 1.0
    assert math.fsum(values) <= 1.0


MIXED_CASES = [
    pytest.param(
        {"spec_stage": spec("1g"), "mystery_stage": None},
        {"spec_stage": "g1", "mystery_stage": "g1"},
        id="mixed-in-one-group",
    ),
    # FLIP-53 and DESIGN.md: all stages declare a ResourceSpec or none does, so mixing across
    # groups is rejected as well ("Mixing specified and unknown stages raises ValueError").
    pytest.param(
        {"spec_stage": spec("1g"), "spec_other": spec("2g"), "mystery_stage": None},
        {"spec_stage": "g1", "spec_other": "g1", "mystery_stage": "g2"},
        id="mixed-across-groups",
    ),
    pytest.param(
        {"spec_stage": spec("1g"), "mystery_stage": None, "mystery_other": None},
        {"spec_stage": "g1", "mystery_stage": "g2", "mystery_other": "g3"},
        id="one-specified-among-unknown",
    ),
]


@pytest.mark.parametrize(("specs", "groups"), MIXED_CASES)
def test_managed_memory_fractions_mixing_raises(specs: dict[str, ResourceSpec | None], groups: dict[str, str]) -> None:
    with pytest.raises(ValueError) as info:
        managed_memory_fractions(specs, groups)
    msg = str(info.value)
    specified = [s for s, v in specs.items() if v is not None]
    unknown = [s for s, v in specs.items() if v is None]
    assert any(name in msg for name in specified), msg
    assert any(name in msg for name in unknown), msg
