"""The kill-trial harness's pure parts: marker checks on real parquet files, classification, the table; and the
region trial's process checks on a plain subprocess (no Spark)."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.chaos import table
from tests.chaos.__main__ import parse
from tests.chaos.inspect_output import attempt_progress, committed_markers, leftovers
from tests.chaos.outcome import (
    DOWNSTREAM_ROWS,
    INCOMPLETE_COMMIT,
    KILLED_TRY_PUBLISHED,
    LEFTOVER_STAGING,
    NOT_KILLED,
    ORPHAN_JOB,
    ORPHAN_PROCESS,
    REGION,
    RETRY_FAILED,
    MarkerCheck,
    ProcessInfo,
    TrialRecord,
    classify,
    passed,
)
from tests.chaos.processes import marked, role
from tests.chaos.region import lingering, parse_moment
from tests.chaos.results import render_results
from tests.chaos.runner import install_dag

RUNNER = ProcessInfo(pid=4242, role="task runner", cmdline="airflow worker -- 0199-abc")
JVM = ProcessInfo(pid=4300, role="spark-submit JVM", cmdline="java ... org.apache.spark.deploy.SparkSubmit ...")


def complete(try_number: int = 2) -> MarkerCheck:
    return MarkerCheck(f"try={try_number}", try_number, claimed_rows=20, listed_files=10, rows_in_files=20)


def good(**changes: object) -> TrialRecord:
    record = TrialRecord(
        mode="cold",
        trial=1,
        run_id="before-cold-01-1",
        killed=RUNNER,
        markers=[complete()],
        run_state="success",
        slow_tries={1: "failed", 2: "success"},
        downstream_rows=20,
        seconds_to_finish=61.0,
    )
    for name, value in changes.items():
        setattr(record, name, value)
    return record


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, []),
        ({"killed": None}, [NOT_KILLED]),
        ({"orphans": [JVM]}, [ORPHAN_PROCESS]),
        ({"orphan_jobs": [7]}, [ORPHAN_JOB]),
        # the case: the orphan published try=1 with 10 of 20 rows, its other files deleted by the retry
        (
            {"markers": [MarkerCheck("try=1", 1, 10, 5, rows_in_files=10), complete()]},
            [INCOMPLETE_COMMIT, KILLED_TRY_PUBLISHED],
        ),
        (
            {"markers": [MarkerCheck("try=2", 2, 20, 10, missing_files=["a/part-1"], rows_in_files=18)]},
            [INCOMPLETE_COMMIT],
        ),
        ({"markers": [MarkerCheck("try=2", 2, 20, 10, error="JSONDecodeError: x")]}, [INCOMPLETE_COMMIT]),
        ({"markers": [complete(1), complete(2)]}, [KILLED_TRY_PUBLISHED]),
        # a fixed output_path: the orphan published first, the retry failed for good, downstream never ran
        (
            {
                "markers": [complete(1)],
                "run_state": "failed",
                "slow_tries": {1: "failed", 2: "failed"},
                "downstream_rows": None,
            },
            [KILLED_TRY_PUBLISHED, RETRY_FAILED, DOWNSTREAM_ROWS],
        ),
        ({"slow_tries": {1: "success"}}, [RETRY_FAILED]),  # the kill did not fail the try: no retry happened
        ({"downstream_rows": 10}, [DOWNSTREAM_ROWS]),
        ({"leftovers": ["try=1/attempt-x (3 files)"]}, [LEFTOVER_STAGING]),
    ],
)
def test_classify(changes: dict[str, object], expected: list[str]) -> None:
    record = good(**changes)
    assert classify(record) == expected
    assert passed(record) == all(name == LEFTOVER_STAGING for name in expected)


def test_marker_describe() -> None:
    assert complete().describe() == "try=2: claims 20/20 rows"
    torn = MarkerCheck("try=1", 1, 10, 5, missing_files=["x", "y"], rows_in_files=6)
    assert torn.describe() == "try=1: claims 10/20 rows, files hold 6, 2 of 5 files missing"


def write_parts(folder: Path, rows_per_file: list[int]) -> list[tuple[str, int]]:
    folder.mkdir(parents=True)
    written = []
    start = 0
    for index, rows in enumerate(rows_per_file):
        path = folder / f"part-{index:05d}.parquet"
        pq.write_table(pa.table({"n": list(range(start, start + rows))}), path)
        start += rows
        written.append((path.name, path.stat().st_size))
    return written


def commit(try_folder: Path, attempt: str, files: list[tuple[str, int]], rows: int) -> None:
    record = {
        "protocol": 2,
        "files": [f"{attempt}/{name}" for name, _ in files],
        "partition_bytes": [size for _, size in files],
        "rows": rows,
        "attempt": attempt,
    }
    (try_folder / "_COMMITTED").write_text(json.dumps(record))


def test_markers_are_checked_against_the_files_in_storage(tmp_path: Path) -> None:
    stage = tmp_path / "slow_rows"
    # try 2: a complete commit of 20 rows in 4 files; a late attempt beside it is a leftover
    files = write_parts(stage / "try=2" / "attempt-a", [5, 5, 5, 5])
    commit(stage / "try=2", "attempt-a", files, 20)
    write_parts(stage / "try=2" / "attempt-late", [3])
    # try 1: the orphan's commit claims 10 rows in 2 files, one of them deleted under it, one torn
    files = write_parts(stage / "try=1" / "attempt-o", [5, 5, 5])
    (stage / "try=1" / "attempt-o" / files[1][0]).unlink()
    commit(stage / "try=1", "attempt-o", files, 10)
    with (stage / "try=1" / "attempt-o" / files[2][0]).open("ab") as handle:
        handle.write(b"x")
    # try 3: no marker, a staging folder left behind
    write_parts(stage / "try=3" / "attempt-b", [2])

    one, two = committed_markers(stage)
    assert (one.location, one.try_number, one.claimed_rows, one.listed_files) == ("try=1", 1, 10, 3)
    assert one.missing_files == [f"attempt-o/{files[1][0]}"]
    assert len(one.size_mismatches) == 2  # the appended byte, and the torn file's footer no longer readable
    assert one.rows_in_files == 5
    assert not one.complete()
    assert two.complete() and two.rows_in_files == 20
    assert leftovers(stage) == ["try=2/attempt-late (1 files)", "try=3 (1 files)"]
    assert attempt_progress(stage / "try=3") == (True, 1)
    assert attempt_progress(stage / "try=9") == (False, 0)
    assert committed_markers(tmp_path / "nothing") == []


def test_a_marker_that_is_not_json_is_incomplete(tmp_path: Path) -> None:
    (tmp_path / "s" / "try=1").mkdir(parents=True)
    (tmp_path / "s" / "try=1" / "_COMMITTED").write_text("{not json")
    (check,) = committed_markers(tmp_path / "s")
    assert check.error is not None and check.error.startswith("JSONDecodeError")
    assert not check.complete()


@pytest.mark.parametrize(
    ("cmdline", "expected"),
    [
        ("airflow worker -- 0199b7c0-aaaa", "task runner"),
        ("airflow worker -- LocalExecutor: kill_trial.slow_rows", "task supervisor"),
        ("/usr/lib/jvm/java-17/bin/java -cp x org.apache.spark.deploy.SparkSubmit --name n", "spark-submit JVM"),
        ("/work/main/.venv/bin/python -m pyspark.daemon", "pyspark worker"),
        ("/work/main/.venv/bin/python /x/driver.py job.json", "python driver"),
        ("/usr/bin/java -jar other.jar", "JVM"),
        ("sleep 5", "other"),
    ],
)
def test_role(cmdline: str, expected: str) -> None:
    assert role(cmdline) == expected


def test_table_counts_each_failure_class_per_mode() -> None:
    records = [
        good(),
        good(trial=2, orphans=[JVM], markers=[MarkerCheck("try=1", 1, 10, 5, rows_in_files=10), complete()]),
        good(mode="warm", trial=1, orphan_jobs=[3], leftovers=["try=1 (4 files)"], seconds_to_finish=90.0),
    ]
    (cold, warm) = table.summary_rows(records)
    header = list(table.SUMMARY_HEADER)
    assert dict(zip(header, cold, strict=True)) == {
        "mode": "cold",
        "trials": "2",
        "passed": "1/2",
        "not_killed": "0",
        "orphan_process": "1",
        "orphan_job": "0",
        "incomplete_commit": "1",
        "killed_try_published": "1",
        "retry_failed": "0",
        "downstream_rows": "0",
        "leftover_staging": "0",
        "median s kill to end": "61",
    }
    assert warm[:3] == ["warm", "1", "0/1"] and warm[header.index("orphan_job")] == "1"
    trials = table.trial_rows(records)
    assert trials[1][3] == "1: spark-submit JVM"
    assert trials[1][4] == "try=1: claims 10/20 rows; try=2: claims 20/20 rows"
    assert trials[1][-1] == "FAIL (orphan_process, incomplete_commit, killed_try_published)"
    assert trials[0][-1] == "pass"
    assert trials[2][3] == "none; jobs [3] still running"


def test_markdown_escapes_pipes_and_has_one_row_per_trial() -> None:
    text = table.markdown_table(("a", "b"), [["x|y", "z"]])
    assert text.splitlines() == ["| a | b |", "|---|---|", "| x\\|y | z |"]


def test_results_json_round_trips_into_the_same_markdown() -> None:
    records = [good(), good(trial=2, orphans=[JVM], notes=["the harness ended orphan 4300 (spark-submit JVM)"])]
    data = {
        "context": {
            "command": "python -m tests.chaos --trials 2",
            "label": "before",
            "provider_code": "abc",
            "started_at": "t0",
            "ended_at": "t1",
            "trials_per_mode": 2,
            "kill_delay_s": 3.0,
            "row_sleep_s": 2.5,
            "expected_rows": 20,
            "cpus": 2,
        },
        "trials": [record.to_dict() for record in records],
    }
    again = json.loads(json.dumps(data))
    assert [TrialRecord.from_dict(t).to_dict() for t in again["trials"]] == data["trials"]
    text = render_results(again)
    assert "| cold | 2 | 1/2 |" in text
    assert "command: `python -m tests.chaos --trials 2`" in text
    assert again["trials"][1]["failures"] == [ORPHAN_PROCESS] and again["trials"][1]["passed"] is False
    assert text.endswith("Notes:\n\n- cold #2: the harness ended orphan 4300 (spark-submit JVM)\n")


def test_the_installed_dag_gets_the_row_sleep(tmp_path: Path) -> None:
    install_dag(tmp_path, 0.75)
    text = (tmp_path / "kill_trial.py").read_text()
    assert "\nROW_SLEEP = 0.75\n" in text and "ROWS = 20" in text


def test_kill_moments_cycle_over_the_trials() -> None:
    assert parse(["--kill-at-parts", "0,2,4"]).kill_at_parts == (0, 2, 4)
    assert parse([]).kill_at_parts == (0, 2)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--modes", "cold,hot"], "unknown mode(s) ['hot']; allowed: cold, warm, region"),
        (["--trials", "0"], "at least 1"),
        (["--kill-at-parts", "0,x"], "--kill-at-parts '0,x': comma-separated whole numbers from 0 to 9"),
        (["--kill-at-parts", "12"], "--kill-at-parts '12': comma-separated whole numbers from 0 to 9"),
        (["--region-kill-at", "5,x2"], "--region-kill-at '5,x2': comma-separated N or wN, N seconds (0 or more)"),
        (["--region-kill-at", "w-1"], "--region-kill-at 'w-1': comma-separated N or wN, N seconds (0 or more)"),
        (["--region-kill-at", ","], "--region-kill-at ',': comma-separated N or wN, N seconds (0 or more)"),
    ],
)
def test_bad_arguments_name_the_option(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse(argv)
    assert message in capsys.readouterr().err


# -- the region mode: a stand-in task running one region, no Airflow


STAND_IN = ProcessInfo(pid=5000, role="stand-in task", cmdline="python tests/chaos/region_task.py /tmp/w m")


def region_record(**changes: object) -> TrialRecord:
    record = TrialRecord(mode=REGION, trial=1, run_id="r-region-01-1", killed=STAND_IN, seconds_to_finish=0.4)
    for name, value in changes.items():
        setattr(record, name, value)
    return record


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        ({}, []),  # no DAG run: no marker, no retry and no consumer to fail on
        ({"killed": None}, [NOT_KILLED]),
        ({"orphans": [JVM]}, [ORPHAN_PROCESS]),
        ({"leftovers": ["finegrained-conf-x/spark.conf (secret properties)"]}, [LEFTOVER_STAGING]),
    ],
)
def test_a_region_trial_fails_only_on_what_outlives_the_task(changes: dict[str, object], expected: list[str]) -> None:
    record = region_record(**changes)
    assert classify(record) == expected
    assert passed(record) == all(name == LEFTOVER_STAGING for name in expected)


def test_region_trials_share_the_table_and_results_file() -> None:
    records = [region_record(), region_record(trial=2, orphans=[JVM])]
    (summary,) = table.summary_rows(records)
    assert summary[:4] == ["region", "2", "1/2", "0"]
    trials = table.trial_rows(records)
    assert trials[0] == ["region", "1", "stand-in task 5000", "none", "-", "-", "-", "-", "0", "pass"]
    assert trials[1][-1] == "FAIL (orphan_process)"
    context = {
        "command": "python -m tests.chaos --modes region --trials 2",
        "label": "region",
        "provider_code": "abc",
        "started_at": "t0",
        "trials_per_mode": 2,
        "modes": [REGION],
        "region_kill_at": ["8", "w1"],
        "kill_delay_s": 1.0,
        "row_sleep_s": 2.0,
        "expected_rows": 20,
        "cpus": 2,
    }
    text = render_results({"context": context, "trials": [record.to_dict() for record in records]})
    assert "killed at 8, w1 (N: seconds after its start" in text
    assert "attempt folder" not in text  # the Airflow modes' kill moment is not theirs


def test_region_options_and_moments() -> None:
    args = parse(["--modes", "region", "--region-kill-at", "0.5,w2"])
    assert args.modes == ("region",) and args.region_kill_at == ("0.5", "w2")
    assert parse([]).region_kill_at == ("8", "w1")
    assert [parse_moment(text) for text in ("5", "w0", "w1.5")] == [(False, 5.0), (True, 0.0), (True, 1.5)]
    for bad in ("x", "w", "-1", "nan"):
        with pytest.raises(ValueError):
            parse_moment(bad)


def test_marked_processes_and_what_lingers_after_a_kill() -> None:
    marker = f"m{os.getpid()}-{time.monotonic_ns()}"
    env = {**os.environ, "FINEGRAINED_KILL_TEST": marker}
    child = subprocess.Popen(["sleep", "60"], env=env)
    try:
        deadline = time.monotonic() + 10
        while not marked("FINEGRAINED_KILL_TEST", marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        (found,) = marked("FINEGRAINED_KILL_TEST", marker)
        assert found.pid == child.pid
        assert marked("FINEGRAINED_KILL_TEST", marker + "-other") == []
        assert lingering([found], time.monotonic()) == [found]  # alive at a deadline already past
        child.kill()
        assert lingering([found], time.monotonic() + 10) == []  # a zombie is gone
        child.wait()
        assert lingering([found], time.monotonic() + 10) == [] and marked("FINEGRAINED_KILL_TEST", marker) == []
    finally:
        child.kill()
        child.wait()


STAND_IN_SCRIPT = """
import os, subprocess, sys, time
work, marker = sys.argv[1:3]
env = {**os.environ, "FINEGRAINED_KILL_TEST": marker}
if os.environ.get("STAND_IN_ORPHAN"):  # a process of the region that outlives it, as spark-submit's JVM did
    subprocess.Popen(["sleep", "60"], env=env, start_new_session=True)
    os.makedirs(os.path.join(work, "finegrained-conf-1"))
    open(os.path.join(work, "finegrained-conf-1", "spark.properties"), "w").close()
else:  # one that ends with its parent, as the provider's do (spark/parent_death.py)
    follower = "import os, time\\nparent = os.getppid()\\nwhile os.getppid() == parent: time.sleep(0.05)"
    subprocess.Popen([sys.executable, "-c", follower], env=env)
for n in (1, 2):
    open(os.path.join(work, f"worker-{n}"), "w").close()
time.sleep(60)
"""


@pytest.fixture
def stand_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The region trials' stand-in task replaced by a plain Python script (no Spark): the trial's own steps."""
    from tests.chaos import region

    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN_SCRIPT)
    monkeypatch.setattr(region, "TASK", str(script))
    return tmp_path


def test_a_region_trial_records_what_outlives_the_stand_in(stand_in: Path) -> None:
    from tests.chaos.region import region_trial

    work = stand_in / "work"
    record = region_trial(1, "t-region-01-1", "w0", "", 0.5, work, {"STAND_IN_ORPHAN": "1"})
    assert record.killed is not None and record.killed.role == "stand-in task"
    assert record.kill_moment == "0 s after both Python workers ran: 1 process(es) of the region, 2 Python worker(s)"
    assert [orphan.role for orphan in record.orphans] == ["other"]  # the `sleep` that outlived it
    assert record.leftovers == ["finegrained-conf-1/spark.properties (secret properties)"]
    assert classify(record) == [ORPHAN_PROCESS, LEFTOVER_STAGING]
    assert record.notes == ["the harness ended 1 orphan(s) after the trial"]
    assert list(work.iterdir()) == []  # the trial's folder is gone, and with it the orphan (ended)


def test_the_region_mode_alone_runs_the_trials_and_writes_the_results(
    stand_in: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.chaos.__main__ import main

    results = stand_in / "results"
    argv = ["--modes", "region", "--trials", "2", "--region-kill-at", "0.2,w0", "--source", "worktree"]
    argv += ["--no-fast-jvm", "--label", "t", "--results", str(results), "--work", str(stand_in)]
    assert main(argv) == 0
    data = json.loads((results / "t.json").read_text())
    assert [trial["passed"] for trial in data["trials"]] == [True, True]
    assert data["trials"][0]["kill_moment"].startswith("0.2 s after the start")
    assert data["trials"][1]["kill_moment"].startswith("0 s after both Python workers ran")
    assert data["context"]["command"].startswith("python -m tests.chaos --modes region --trials 2")
    printed = capsys.readouterr().out
    assert "| region | 2 | 2/2 |" in printed and printed.count("| region |") == 3
    assert (results / "t.md").read_text() in printed
