"""The row-group benchmark's parts that need no Spark: which jobs a measure counts, the medians, the table."""

from __future__ import annotations

from typing import Any

from bench import row_groups
from bench.substrate.spark_metrics import _is_tagged


def test_jobs_are_counted_by_connect_tag_or_by_job_group() -> None:
    connect = {"jobTags": ["SparkConnect_OperationTag_User_x_Session_y_Tag_sf1-provider-0-q1"], "jobGroup": None}
    classic = {"jobTags": ["spark-session-1-thread-2-x"], "jobGroup": "provider-both-0-write"}
    assert _is_tagged(connect, "sf1-provider-0-q1", job_group=False)
    assert not _is_tagged(connect, "provider-0-q1-extra", job_group=False)
    assert _is_tagged(classic, "provider-both-0-write", job_group=True)
    assert not _is_tagged(classic, "provider-both-0-read", job_group=True)
    assert not _is_tagged(connect, "sf1-provider-0-q1", job_group=True)


def _run(variant: str, repeat: int, write_cpu: float, read_cpu: float) -> dict[str, Any]:
    return {
        "variant": variant,
        "repeat": repeat,
        "write": {"wall_s": write_cpu / 2, "tasks": 20.0, "cpu_time_s": write_cpu},
        "read": {"wall_s": read_cpu / 2, "tasks": 14.0, "cpu_time_s": read_cpu},
    }


def test_medians_per_side_and_cpu_against_spark_s_defaults() -> None:
    runs = [
        _run("spark-defaults", 0, 60, 40),
        _run("provider-row-groups", 0, 66, 44),
        _run("spark-defaults", 1, 64, 42),
        _run("provider-row-groups", 1, 72, 46),
        _run("spark-defaults", 2, 62, 80),
        _run("provider-row-groups", 2, 69, 45),
    ]
    summary = row_groups.summarize(runs)
    defaults = summary["spark-defaults"]
    assert defaults["write"]["cpu_time_s"] == 62 and defaults["read"]["cpu_time_s"] == 42
    assert summary["provider-row-groups"]["write"] == {"wall_s": 34.5, "tasks": 20, "cpu_time_s": 69}
    result = {
        "command": "python -m bench.row_groups --scale 10",
        "variants": {k: {"split_bytes": s, "row_group_bytes": r} for k, (s, r) in row_groups.VARIANTS.items()},
        "runs": runs,
        "summary": summary,
    }
    table = row_groups.render(result)
    assert "medians of 3, alternating order" in table
    assert "| provider-row-groups | 128.0 | 16 | 34.5 | 20 | 69 | 22.5 | 14 | 45 | 1.11x / 1.07x |" in table
    assert "| spark-defaults | 128.0 | 128 | 31.0 | 20 | 62 | 21.0 | 14 | 42 | 1.00x / 1.00x |" in table
