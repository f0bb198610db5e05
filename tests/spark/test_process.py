"""Real processes (sh, python, sleep) standing in for spark-submit: fast, no Spark needed."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from airflow_provider_finegrained.spark.log_ids import find_application_id, find_driver_id
from airflow_provider_finegrained.spark.process import (
    SparkSubmitCancelled,
    SparkSubmitProcess,
    SparkSubmitTimeout,
    run_spark_submit,
)
from airflow_provider_finegrained.spark.process_tree import kill_process_tree, process_group_members


@pytest.mark.parametrize(
    ("line", "app_id"),
    [
        ("finegrained: application id local-1795309566438", "local-1795309566438"),
        (
            "26/11/22 INFO StandaloneSchedulerBackend: Connected to Spark cluster with app ID app-20261122010203-0000",
            "app-20261122010203-0000",
        ),
        (
            "INFO Client: Submitted application application_1700000000000_0042",
            "application_1700000000000_0042",
        ),
        ("INFO YarnClientImpl: Submitted application application_1795791124794_0001", "application_1795791124794_0001"),
        (
            "INFO Client: Application report for application_1795791124794_0001 (state: ACCEPTED)",
            "application_1795791124794_0001",
        ),
        # Named, but not yet on the cluster: Spark's YARN client uploads the application's files first.
        ("INFO Client: Application ID is assigned: application_1795791124794_0001", None),
        ("INFO Client: Submitting application application_1795791124794_0001 to ResourceManager", None),
        (
            "INFO Client: Uploading resource file:/x/pyspark.zip -> hdfs://nn/user/u/.sparkStaging/"
            "application_1795791124794_0001/pyspark.zip",
            None,
        ),
        (
            "INFO SingleEventLogFileWriter: Logging events to file:/tmp/ev/local-1795309566438.inprogress",
            "local-1795309566438",
        ),
        (
            "INFO RollingEventLogFilesWriter: Logging events to file:/tmp/ev/eventlog_v2_local-1795310216109",
            "local-1795310216109",
        ),
        (
            "spark-app-selector -> spark-0123456789abcdef0123456789abcdef,",
            "spark-0123456789abcdef0123456789abcdef",
        ),
        ("INFO SparkContext: Running Spark version 4.3.0", None),
        ("INFO DiskBlockManager: Created local directory at /tmp/blockmgr-eac476cb", None),
        ("my-app-20261122010203-0000x", None),
        ("local-12", None),
    ],
)
def test_find_application_id(line: str, app_id: str | None) -> None:
    assert find_application_id(line) == app_id


def test_find_driver_id() -> None:
    line = "INFO RestSubmissionClient: Submission successfully created as driver-20261122010203-0001."
    assert find_driver_id(line) == "driver-20261122010203-0001"
    assert find_application_id(line) is None
    assert find_driver_id("no driver here") is None


def _python(code: str) -> list[str]:
    return [sys.executable, "-u", "-c", code]


def _gone(pids: list[int]) -> bool:
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return False
        except psutil.NoSuchProcess:
            pass
    return True


def test_streams_merged_output_and_reports_ids() -> None:
    code = (
        "import sys\n"
        "print('starting')\n"
        "print('INFO Connected to Spark cluster with app ID app-20261122010203-0007', file=sys.stderr)\n"
        "print('again app-20261122010203-0007 and app-20261122010203-0008')\n"
        "print('caf\\u00e9 done')\n"
        "sys.exit(3)\n"
    )
    lines: list[str] = []
    ids: list[str] = []
    result = run_spark_submit(_python(code), None, lines.append, app_id_callback=ids.append)
    assert lines == [
        "starting",
        "INFO Connected to Spark cluster with app ID app-20261122010203-0007",
        "again app-20261122010203-0007 and app-20261122010203-0008",
        "café done",
    ]
    assert result.returncode == 3
    assert result.application_id == "app-20261122010203-0007"
    assert ids == ["app-20261122010203-0007"]
    assert result.tail == tuple(lines)
    assert not result.killed
    assert result.duration_s > 0


def test_tail_keeps_the_last_lines() -> None:
    code = "for i in range(200): print(f'line {i}')"
    process = SparkSubmitProcess(_python(code), None, lambda _line: None, tail_lines=50)
    process.start()
    result = process.wait()
    assert result.returncode == 0
    assert result.tail == tuple(f"line {i}" for i in range(150, 200))


def test_env_is_passed_as_given() -> None:
    lines: list[str] = []
    env = {"PATH": os.environ.get("PATH", ""), "FG_MARK": "x1"}
    result = run_spark_submit(["sh", "-c", "echo mark=$FG_MARK home=${HOME:-unset}"], env, lines.append)
    assert result.returncode == 0
    assert lines == ["mark=x1 home=unset"]


def _tree_script(tmp_path: Path) -> list[str]:
    # A launcher with two children and a grandchild; one child ignores SIGTERM, like a stuck JVM.
    script = tmp_path / "tree.sh"
    script.write_text(
        "#!/bin/sh\n"
        "sleep 600 &\n"
        "sh -c 'trap \"\" TERM; sleep 600 & wait' &\n"
        "echo started app-20261122010203-0000\n"
        "wait\n"
    )
    return ["sh", str(script)]


def test_kill_from_another_thread_stops_the_whole_group(tmp_path: Path) -> None:
    lines: list[str] = []
    process = SparkSubmitProcess(_tree_script(tmp_path), None, lines.append, kill_grace_s=1.0)
    seen = threading.Event()
    process.app_id_callback = lambda _app_id: seen.set()
    process.start()
    assert process.pid is not None
    pid = process.pid
    assert os.getpgid(pid) == pid and os.getsid(pid) == pid

    results = []
    waiter = threading.Thread(target=lambda: results.append(process.wait()))
    waiter.start()
    assert seen.wait(10)
    deadline = time.monotonic() + 10
    while len(process_group_members(pid)) < 4 and time.monotonic() < deadline:
        time.sleep(0.05)
    members = process_group_members(pid)
    assert len(members) >= 4

    report = process.kill()
    waiter.join(10)
    assert report is not None
    assert report.killed  # the TERM-ignoring shell needed SIGKILL
    assert set(report.terminated) | set(report.killed) >= set(members)
    assert process_group_members(pid) == []
    assert _gone(members)
    result = results[0]
    assert result.killed
    assert result.application_id == "app-20261122010203-0000"
    assert process.kill() is not None  # a second kill is harmless


def test_timeout_kills_the_tree_and_raises(tmp_path: Path) -> None:
    lines: list[str] = []
    process = SparkSubmitProcess(_tree_script(tmp_path), None, lines.append, timeout=2.0, kill_grace_s=1.0)
    process.start()
    pid = process.pid
    assert pid is not None
    started = time.monotonic()
    with pytest.raises(SparkSubmitTimeout) as caught:
        process.wait()
    assert time.monotonic() - started < 10
    assert caught.value.application_id == "app-20261122010203-0000"
    assert "started app-20261122010203-0000" in caught.value.tail
    assert "within 2 s" in str(caught.value)
    assert process_group_members(pid) == []


def test_leftovers_of_a_finished_launcher_are_stopped() -> None:
    # The launcher exits at once but leaves a background child holding stdout open.
    process = SparkSubmitProcess(["sh", "-c", "sleep 600 & echo bye"], None, lambda _line: None)
    process.start()
    pid = process.pid
    assert pid is not None
    started = time.monotonic()
    result = process.wait()
    assert result.returncode == 0
    assert time.monotonic() - started < 15
    assert process_group_members(pid) == []


def test_following_until_the_application_is_named_leaves_spark_submit_running() -> None:
    # A cluster-mode spark-submit names the driver, then follows it: the task may stop following there.
    code = (
        "import time\n"
        "print('submitting')\n"
        "print('Driver successfully submitted as driver-20261128040500-0003')\n"
        "time.sleep(0.5)\n"
        "print('State of driver-20261128040500-0003 is FINISHED')\n"
    )
    lines: list[str] = []
    process = SparkSubmitProcess(_python(code), None, lines.append)
    process.start()
    assert process.follow_until(lambda: process.driver_id is not None)
    assert process.driver_id == "driver-20261128040500-0003"
    assert process.returncode is None  # still running: following stopped, spark-submit did not
    assert lines == ["submitting", "Driver successfully submitted as driver-20261128040500-0003"]
    result = process.wait()  # and its end is still there to follow
    assert result.returncode == 0 and not result.killed
    assert lines[-1] == "State of driver-20261128040500-0003 is FINISHED"


def test_following_until_a_name_that_never_comes_ends_with_spark_submit() -> None:
    process = SparkSubmitProcess(["sh", "-c", "echo refused; exit 1"], None, lambda _line: None)
    process.start()
    assert not process.follow_until(lambda: process.application_id is not None)
    result = process.wait()
    assert result.returncode == 1 and result.tail == ("refused",)


def test_a_failing_callback_kills_the_process() -> None:
    def explode(line: str) -> None:
        raise RuntimeError(f"log sink broke on {line!r}")

    process = SparkSubmitProcess(["sh", "-c", "echo hi; sleep 600"], None, explode, kill_grace_s=1.0)
    process.start()
    pid = process.pid
    assert pid is not None
    with pytest.raises(RuntimeError, match="log sink broke"):
        process.wait()
    assert process_group_members(pid) == []


def test_kill_before_start_cancels() -> None:
    process = SparkSubmitProcess(["sh", "-c", "echo never"], None, lambda _line: None)
    assert process.kill() is None
    with pytest.raises(SparkSubmitCancelled):
        process.start()


def test_kill_process_tree_by_pid_of_a_plain_child() -> None:
    # Not a group leader: only the process and its descendants are signalled, not our own group.
    child = subprocess.Popen(["sh", "-c", "sleep 600 & wait"])
    try:
        deadline = time.monotonic() + 10
        while not psutil.Process(child.pid).children() and time.monotonic() < deadline:
            time.sleep(0.05)
        grandchildren = [p.pid for p in psutil.Process(child.pid).children()]
        report = kill_process_tree(child, grace_s=2.0)
        assert child.pid in report.terminated
        assert _gone([child.pid, *grandchildren])
        assert child.returncode is not None
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_kill_process_tree_of_a_finished_process_is_a_no_op() -> None:
    child = subprocess.Popen(["true"], start_new_session=True)
    child.wait()
    report = kill_process_tree(child)
    assert report.terminated == () and report.killed == ()
