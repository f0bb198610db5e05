"""bench/app_start: an application's and an executor's start measured apart, for the simulator's loopback model."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest

from bench.app_start import APP_START_FILE, context_share
from bench.app_start import main as app_start_main
from bench.simulate import loopback


def test_the_results_file_is_the_one_the_loopback_model_reads() -> None:
    assert APP_START_FILE == loopback.APP_START_FILE


def test_app_start_finds_where_the_event_log_begins(tmp_path: Path) -> None:
    folder = tmp_path / "eventlog_v2_local-1"
    folder.mkdir()
    events = [
        {"Event": "SparkListenerLogStart"},
        {"Event": "SparkListenerApplicationStart", "Timestamp": 104_000},
        {"Event": "SparkListenerJobStart", "Submission Time": 110_000},
        {"Event": "SparkListenerJobStart", "Submission Time": 120_000},
    ]
    (folder / "events_1_local-1").write_text("\n".join(json.dumps(e) for e in events))
    (folder / "appstatus_local-1").write_text("")
    # Launched at 100 s: the SparkContext began 4 s in, the first job 10 s in.
    assert context_share(tmp_path, 100.0) == pytest.approx(0.4)
    with pytest.raises(ValueError, match="no application start or job after the launch"):
        context_share(tmp_path, 115.0)


@pytest.mark.slow
@pytest.mark.cluster
@pytest.mark.timeout(900)
def test_app_start_measures_a_real_application_and_executor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import psutil

    # Every process the harness starts inherits this mark; the suite's other worker starts Spark JVMs too.
    mark = ("FINEGRAINED_TEST_APP_START", str(tmp_path))
    monkeypatch.setenv(*mark)

    def spark_jvms() -> set[int]:
        classes = ("CoarseGrainedExecutorBackend", "deploy.master.Master", "deploy.worker.Worker", "SparkSubmit")
        found = set()
        for p in psutil.process_iter(["cmdline"]):
            if any(c in arg for arg in (p.info["cmdline"] or []) for c in classes):
                with contextlib.suppress(psutil.Error):
                    if p.environ().get(mark[0]) == mark[1]:
                        found.add(p.pid)
        return found

    before = spark_jvms()
    assert app_start_main(["--repeats", "1", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "app-start.json").read_text())
    # One trivial PySpark application and one executor's JVM start. How much CPU each costs depends on the
    # JVM's flags (22 and 6.5 CPU s on the idle benchmark machine; 4.4 and 1.1 under the test suite's
    # class-data archive and C1, tests/jvm_start.py), so only their order is asserted: an application
    # starts a JVM and a Python driver and runs a job, an executor only starts a JVM.
    assert 0 < result["median_context_share"] < 1
    assert 0.2 < result["executor"]["median_cpu_s"] < result["median_cpu_s"] < 200
    assert result["executor"]["median_wall_s"] > 0
    # The applications and the one-worker cluster it started are gone, executors included.
    assert spark_jvms() - before == set()
