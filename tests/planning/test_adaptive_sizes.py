"""AQE's sizes of a stage (advisory size, skew-join threshold) from its measured scanned files."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_finegrained.planning.adaptive_sizes import decide_adaptive, skew_join_conf
from airflow_provider_finegrained.planning.balance import decide_balance

M = 2**20


def test_skew_join_conf() -> None:
    assert skew_join_conf(8 * M) == {
        "spark.sql.adaptive.skewJoin.enabled": "true",
        "spark.sql.adaptive.skewJoin.skewedPartitionFactor": "2",
        "spark.sql.adaptive.skewJoin.skewedPartitionThresholdInBytes": str(8 * M),
    }
    with pytest.raises(ValueError, match="advisory partition bytes must be >= 1, got 0"):
        skew_join_conf(0)


@pytest.mark.parametrize(
    ("files", "avg", "expected_advisory", "skewed"),
    [
        # no files scanned (an in-region handover): the planned bytes per task
        (None, 8 * M, 8 * M, False),
        # even files: not skewed
        ([2 * M] * 8, 8 * M, 8 * M, False),
        # largest exactly 2x the median: not skewed (the rule needs more than 2x)
        ([4 * M] + [2 * M] * 7, 8 * M, 8 * M, False),
        # 5 MiB over 2 MiB = 2.5x: skewed; share 5/19, advisory 8 MiB x 14/19 = 6181080.4 -> 6181080
        ([5 * M] + [2 * M] * 7, 8 * M, 6_181_080, True),
        # 40 MiB and 19 of 2 MiB: share 40/78, advisory 8 MiB x 38/78 = 4086757.7 -> 4086758
        ([40 * M] + [2 * M] * 19, 8 * M, 4_086_758, True),
        # one file holds 100/104 of the bytes: 8 MiB x 4/104 is below a quarter of 8 MiB -> 2 MiB
        ([100 * M] + [M] * 4, 8 * M, 2 * M, True),
        # tiny bytes per task: a quarter of 3 is 0, 3 x 4/104 rounds to 0, at least 1 byte
        ([100 * M] + [M] * 4, 3, 1, True),
    ],
)
def test_adaptive_sizes_table(files: list[int] | None, avg: int, expected_advisory: int, skewed: bool) -> None:
    balance = decide_balance(files, 8) if files is not None else None
    sizes = decide_adaptive(avg, balance)
    assert (sizes.advisory_bytes, sizes.skew_threshold_bytes, sizes.skewed) == (
        expected_advisory,
        expected_advisory,
        skewed,
    )
    assert sizes.session_conf() == {
        "spark.sql.adaptive.advisoryPartitionSizeInBytes": str(expected_advisory),
        **skew_join_conf(expected_advisory),
    }
    record = sizes.to_dict()
    assert record["settings"] == sizes.session_conf() and record["skewed_input"] is skewed
    assert ("input skewed" in record["why"]) is skewed


def test_adaptive_sizes_say_why() -> None:
    sizes = decide_adaptive(8 * M, decide_balance([40 * M] + [2 * M] * 19, 8))
    assert sizes.why.startswith("input skewed: largest file 20.0x the median, 51% of the scanned bytes")
    assert "advisory and skew threshold 3.9 MiB (avg_bytes_per_task 8.0 MiB" in sizes.why


@pytest.mark.parametrize("avg", [0, -1, True, 2.5])
def test_adaptive_sizes_reject_bad_bytes_per_task(avg: Any) -> None:
    with pytest.raises(ValueError, match=r"avg_bytes_per_task must be an integer >= 1, got "):
        decide_adaptive(avg, None)
