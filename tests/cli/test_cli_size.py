"""``finegrained size`` in-process: the decision and Spark settings follow the input bytes."""

from __future__ import annotations

import json

import pytest

from airflow_provider_finegrained.cli.main import main

MiB = 2**20


def size_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, dict[str, object]]:
    assert main(["size", "--json", "--cores", "2", "--memory", "4g", "--avg-bytes-per-task", "64m", *args]) == 0
    return json.loads(capsys.readouterr().out)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("args", "decided", "after", "rule"),
    [
        # 300 MiB / (64 MiB - 5 MiB broadcast) = 5.08 -> 6; on 2 slots 6 is whole waves.
        (["--input-bytes", "300m", "--broadcast-bytes", "5m"], 6, 6, "bytes / avg_bytes_per_task"),
        # 320 MiB / 64 MiB = 5 -> odd on 2 slots: tie goes up to 6.
        (["--input-bytes", "320m"], 5, 6, "bytes / avg_bytes_per_task"),
        (["--input-bytes", "40g"], 128, 128, "clamped to max_parallelism"),
        (["--input-bytes", "0"], 1, 1, "zero bytes: min_parallelism"),
        ([], 128, 128, "source: max_parallelism (no default set)"),
    ],
)
def test_size_follows_the_data(
    capsys: pytest.CaptureFixture[str], args: list[str], decided: int, after: int, rule: str
) -> None:
    out = size_json(capsys, *args)
    assert out["decision"]["parallelism"] == decided
    assert out["decision"]["rule"] == rule
    assert out["sizing"]["parallelism"] == after
    assert out["spark_conf"]["spark.sql.shuffle.partitions"] == str(after)
    assert out["spark_conf"]["spark.driver.memory"] == "4096m"


def test_size_cluster_mode_sets_executors(capsys: pytest.CaptureFixture[str]) -> None:
    out = size_json(capsys, "--input-bytes", "1g", "--cluster", "--cores", "8", "--memory", "32g")
    conf = out["spark_conf"]
    # 1 GiB / 64 MiB = 16 tasks; 8 cores / 2 per executor = 4 executors, 8 slots, 2 waves. As a run asks for
    # them: one at the start, up to 4 from the first job (dynamic allocation within the decision).
    assert (conf["spark.dynamicAllocation.maxExecutors"], conf["spark.executor.cores"]) == ("4", "2")
    assert (conf["spark.executor.instances"], conf["spark.cores.max"]) == ("1", "8")
    assert out["sizing"]["waves"] == 2


def test_size_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["size", "--input-bytes", "300m", "--stage", "q3_join", "--cores", "2"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0] == "stage q3_join"
    assert "spark.sql.shuffle.partitions" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input-bytes", "lots"], "input bytes must be a byte count"),
        (["--input-bytes", "1g", "--min-parallelism", "9", "--max-parallelism", "3"], "min_parallelism (9) is above"),
        (["--input-bytes", "1g", "--max-broadcast-ratio", "1"], "max_broadcast_ratio must be in [0, 1)"),
    ],
)
def test_size_bad_input_is_a_clear_error(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    assert main(["size", *args]) == 2
    assert message in capsys.readouterr().err


def test_finegrained_size_prints_what_a_run_decides_not_a_reduced_copy(capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 30: ``size`` once ran a reduced copy of the decision (no input balance, AQE or executors' lifecycle)
    and printed other settings than a run of the same stage gets."""
    files = ("--input-bytes", "300m", "--partitions", "3")
    out = size_json(capsys, *files, "--cluster", "--cores", "8", "--memory", "32g")
    conf, balance = out["spark_conf"], out["sizing"]["balance"]
    assert isinstance(conf, dict) and isinstance(balance, dict)
    # The input balance over the three files, as the trace states it.
    assert balance["settings"] == {k: conf[k] for k in balance["settings"]}
    assert set(balance["settings"]) == {"spark.sql.files.maxPartitionBytes", "spark.sql.files.openCostInBytes"}
    # AQE as a run sets it: its advisory size, and no coalescing below the stage's memory floor.
    assert conf["spark.sql.adaptive.enabled"] == "true"
    assert conf["spark.sql.adaptive.coalescePartitions.minPartitionNum"] == str(out["sizing"]["memory_floor"])
    assert conf["spark.sql.adaptive.advisoryPartitionSizeInBytes"] == str(64 * MiB)
    # The executors' lifecycle: dynamic allocation up to the planned executors, released when idle.
    assert conf["spark.dynamicAllocation.enabled"] == "true"
    assert conf["spark.dynamicAllocation.executorIdleTimeout"] == "30s"
    without = size_json(capsys, *files, "--no-aqe")["spark_conf"]
    assert without["spark.sql.adaptive.enabled"] == "false"
