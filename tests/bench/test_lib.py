"""bench/lib's parts that need no Spark: the orders runs alternate in, the sweep, the statistics, the commands."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.lib import provider, report, session, stats, sweep
from bench.lib.pipeline import STAGES, fused_producers


def test_runs_alternate_or_take_every_place_in_turn() -> None:
    assert [sweep.alternating("abc", i) for i in range(3)] == [list("abc"), list("cba"), list("abc")]
    assert [sweep.in_turn("abc", i) for i in range(4)] == [list("abc"), list("bca"), list("cab"), list("abc")]
    assert sweep.rounds([1, 2], 2) == [[1, 2], [2, 1]]
    assert sweep.rounds([1, 2], 2, warmup=True) == [[2, 1], [1, 2], [2, 1]]  # the warm-up first, not kept


def test_the_sweep_times_every_candidate_in_alternating_rounds_and_keeps_each_stage_s_best() -> None:
    calls: list[tuple[int, int]] = []

    def time_stages(p: int, i: int) -> dict[str, float]:
        calls.append((p, i))
        return dict.fromkeys(STAGES, abs(p - 4) + 1.0)  # fastest at 4 partitions

    samples = sweep.sweep([1, 4, 16], 2, time_stages)
    assert calls == [(1, 0), (4, 0), (16, 0), (16, 1), (4, 1), (1, 1)]
    assert samples[4]["q5_join"] == [1.0, 1.0]
    entry = sweep.sweep_entry(samples, 2, blocking=False)
    assert entry["best"] == dict.fromkeys(STAGES, 4) and list(entry["candidates"]) == ["1", "4", "16"]


@pytest.mark.parametrize(
    ("values", "expected"), [([], 1.0), ([5], 1.0), ([1, 2, 9], 4.5), ([0, 0, 3], float("inf")), ([0, 0], 1.0)]
)
def test_max_over_median(values: list[float], expected: float) -> None:
    assert stats.max_over_median(values) == expected


def test_medians_skip_what_is_missing() -> None:
    assert stats.median([3, None, 1, 2]) == 2 and stats.median([None]) is None
    assert stats.median_of([{"a": 1.0}, {"a": 2.0}, {"b": 5}], "a") == 1.5
    assert stats.median_of([{"a": 1 / 3}], "a", 3) == 0.333


def test_a_plain_spark_submit_is_the_command_a_team_without_the_provider_runs(tmp_path: Path) -> None:
    command = session.spark_submit(
        tmp_path / "app.py", ["{}"], master="local[2]", conf={"b": "2", "a": "1"}, name="n", driver_memory="2g"
    )
    assert command[0].endswith("/bin/spark-submit")
    assert command[1:] == [
        *("--master", "local[2]", "--deploy-mode", "client", "--name", "n", "--driver-memory", "2g"),
        *("--conf", "a=1", "--conf", "b=2", str(tmp_path / "app.py"), "{}"),
    ]
    env = session.spark_submit_env({"SPARK_REMOTE": "sc://x", "PATH": "/bin"})
    assert "SPARK_REMOTE" not in env and env["PYSPARK_PYTHON"] == sys.executable and env["PATH"] == "/bin"


class FakeConf:
    def __init__(self) -> None:
        self.values: dict[str, str] = {"spark.sql.adaptive.coalescePartitions.minPartitionNum": "7"}

    def set(self, key: str, value: str) -> None:
        self.values[key] = value

    def unset(self, key: str) -> None:
        self.values.pop(key, None)


def test_a_stage_s_settings_leave_nothing_of_the_last_stage_s_behind() -> None:
    spark: Any = type("Spark", (), {"conf": FakeConf()})()
    session.apply_conf(spark, session.SPARK_DEFAULTS)
    assert spark.conf.values == session.SPARK_DEFAULTS  # the provider's coalesce floor is gone


def test_the_provider_s_one_stage_decision_is_the_decision_path_s() -> None:
    from airflow_provider_finegrained.planning import ClusterProfile, ParallelismConfig

    config = ParallelismConfig(avg_bytes_per_task=8 * 2**20)
    profile = ClusterProfile(total_cores=2, total_memory=4 * 2**30, executor_memory=2 * 2**30, local=True)
    stage = session.decide_alone("consumer", {"fact": [300 * 2**20] + [2**20] * 99}, config, profile)
    conf = stage.session_conf
    assert conf["spark.sql.shuffle.partitions"] == str(stage.parallelism)
    assert conf["spark.sql.adaptive.coalescePartitions.minPartitionNum"] == str(stage.sizing.coalesce_floor)
    assert stage.sizing.balance is not None  # the files' sizes reach the input balance


def test_the_command_a_result_quotes_and_the_machine_it_ran_on() -> None:
    assert report.command_line("skew", ["--reps", "3", "--name", "a b"]) == "python -m bench skew --reps 3 --name 'a b'"
    assert report.command_line("plan-scaling", []) == "python -m bench plan-scaling"
    assert set(report.machine_brief([1.0, 2.0])) == {"cores", "python", "platform", "load_average_1m"}


def test_results_are_json_and_markdown_beside_it(tmp_path: Path) -> None:
    paths = report.write_results(tmp_path / "out" / "x.json", {"when": tmp_path}, "# x\n", indent=1)
    assert paths == [tmp_path / "out" / "x.json", tmp_path / "out" / "x.md"]
    assert json.loads(paths[0].read_text()) == {"when": str(tmp_path)} and paths[1].read_text() == "# x\n"


def test_a_loopback_cluster_is_read_from_what_cluster_start_prints(tmp_path: Path) -> None:
    out = "master:  spark://127.0.0.1:7077\nweb UI:  http://127.0.0.1:8080\nworkers: 2 x 4 cores, 6g (...)\n"
    cluster = provider.started_cluster(tmp_path, out)
    assert (cluster.master_url, cluster.webui_url) == ("spark://127.0.0.1:7077", "http://127.0.0.1:8080")
    with pytest.raises(provider.CommandFailed):
        provider.started_cluster(tmp_path, "error: no java")


def test_no_warm_pool_means_no_processes_and_nothing_to_stop(tmp_path: Path) -> None:
    assert provider.warm_folders(tmp_path) == [] and provider.warm_pool_processes(tmp_path) == []
    provider.stop_warm_pools(tmp_path)


def test_fused_producers_are_only_those_whose_consumer_runs_with_them() -> None:
    assert fused_producers(STAGES) == {"q3_join", "q5_join"} and fused_producers(["q3_join"]) == set()
