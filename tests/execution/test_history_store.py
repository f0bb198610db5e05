"""The history under the storage root: one object per run, read back newest first, learned from."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from airflow_provider_finegrained.contract import StageTrace
from airflow_provider_finegrained.execution.history_store import HistoryStore, RegionHistory, stage_run
from airflow_provider_finegrained.planning.expansion import LearnedExpansion
from airflow_provider_finegrained.planning.history import StageRun
from airflow_provider_finegrained.runtime.spark_status import SparkStageTasks, StageTaskReport
from airflow_provider_finegrained.storage import filesystem


def spark_stage(stage_id: int, status: str, shuffle_read: int, peak: int, spilled: int = 0) -> SparkStageTasks:
    return SparkStageTasks(
        stage_id, 0, status, 4, {"0": 4}, 1.0, 0.5,
        shuffle_read_bytes=shuffle_read, peak_execution_memory=peak, memory_bytes_spilled=spilled,
        disk_bytes_spilled=spilled // 4,
    )  # fmt: skip


def trace(**changes: object) -> StageTrace:
    report = StageTaskReport(
        ["0"],
        [
            spark_stage(1, "COMPLETE", 0, 0),  # the scan: no shuffle read
            spark_stage(2, "COMPLETE", 3_000, 40_000, spilled=8_000),  # the join
            spark_stage(3, "COMPLETE", 1_000, 70_000),  # the aggregate after it
            spark_stage(4, "SKIPPED", 9_999_999, 9_999_999),  # reused: ran nothing
        ],
    )
    base = StageTrace(
        stage="q3_join",
        region="region-2",
        slot_sharing_group="default",
        region_leader="q3_join",
        consumed_bytes={"orders": 6_000, "lineitem": 4_000, "nation": 500},
        broadcast_inputs=["nation"],
        rule="bytes x learned expansion 0.4 (3 runs) / avg_bytes_per_task",
        parallelism=4,
        learned={"work": 0.4, "runs": 3, "memory": 5.0},
        ended_at="2026-11-24T06:40:00+00:00",
        spark_tasks=report.to_dict(),
        timings={"spark_stage_s": 2.5},
    )
    return StageTrace(**{**base.__dict__, **changes})  # type: ignore[arg-type]


def test_a_run_record_from_the_trace_and_sparks_report() -> None:
    assert stage_run(trace(), "run-1", True) == StageRun(
        run_id="run-1",
        ended_at="2026-11-24T06:40:00+00:00",
        succeeded=True,
        consumed_bytes=10_000,  # the broadcast nation left out
        shuffle_bytes=3_000,  # the largest shuffle one Spark stage read (the skipped one ran nothing)
        memory_bytes=70_000,  # max(40_000 + 8_000, 70_000 + 0)
        parallelism=4,
        spilled_bytes=8_000,
        disk_spilled_bytes=2_000,
        learned_work=0.4,
        learned_memory=5.0,
        stage_s=2.5,
    )
    # Only memory was learned (the rule is the plain one): the run decided from bytes on disk.
    plain = stage_run(trace(rule="bytes / avg_bytes_per_task", spark_tasks=None), "run-2", False)
    assert (plain.learned_work, plain.learned_memory, plain.shuffle_bytes, plain.succeeded) == (None, 5.0, 0, False)


@pytest.mark.parametrize("root_kind", ["local", "memory"])
def test_each_run_is_its_own_object_read_back_newest_first(tmp_path: Path, root_kind: str) -> None:
    root = str(tmp_path) if root_kind == "local" else f"memory://history-{tmp_path.name}"
    store = HistoryStore(root, "tpch pipeline")
    runs = [
        StageRun(f"manual__2026-11-2{i}", f"2026-11-2{i}T06:00:00+00:00", True, 1000, 3000 + i, 0) for i in range(3)
    ]
    locations = [store.record("q3_join", r) for r in runs]
    assert len(set(locations)) == 3
    assert locations[0] == store.folder("q3_join") + "/20261120T060000000000Z__manual__2026-11-20.json"
    # A rerun of run 1 (a cleared task) adds a newer object; the reader keeps the newest per run id.
    rerun = StageRun("manual__2026-11-21", "2026-11-23T07:00:00+00:00", True, 1000, 999, 0)
    store.record("q3_join", rerun)
    filesystem.write_bytes(store.folder("q3_join") + "/29990101T000000000000Z__broken.json", b"{not json")
    assert store.runs("q3_join") == [rerun, runs[2], runs[0]]
    assert store.runs("other_stage") == []
    learning = store.learn("q3_join", 3)
    assert learning.expansion == LearnedExpansion(work=3.0, runs=3)  # median of 0.999, 3.002, 3.000
    assert store.learn("q3_join", 3, exclude_run="manual__2026-11-21").expansion is None


def test_a_region_learns_once_records_each_member_and_can_be_off(tmp_path: Path) -> None:
    log = logging.getLogger("test.history")
    store = HistoryStore(str(tmp_path), "dag")
    on = RegionHistory(store, enabled=True, min_runs=1, run_id="run-9", log=log)
    assert on.learned(["q3_join"]) == {}
    on.record({"q3_join": trace()}, {"q3_join": True})
    assert on.learned(["q3_join"]) == {}  # read once per region run
    again = RegionHistory(store, enabled=True, min_runs=1, run_id="run-10", log=log)
    # 0.3 measured and learned (within 2x of the 0.4 the run used; the scan follows the bytes on disk apart).
    assert again.learned(["q3_join"]) == {"q3_join": LearnedExpansion(work=0.3, runs=1, memory=7.0)}
    off = RegionHistory(store, enabled=False, min_runs=1, run_id="run-11", log=log)
    off.record({"q3_join": trace()}, {"q3_join": True})
    assert off.learned(["q3_join"]) == {}
    assert len(store.runs("q3_join")) == 1
