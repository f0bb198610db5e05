"""Real spark-submit runs on local[2] (about 15-25 s each on a 2-core machine)."""

from __future__ import annotations

import json
import os
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from airflow_provider_finegrained.runtime.output import (
    MARKER,
    CommittedOutput,
    OutputNotCommittedError,
    output_location,
    read_committed,
    stage_folder,
)
from airflow_provider_finegrained.runtime.output_cleanup import cleanup_uncommitted
from airflow_provider_finegrained.spark.java import check_java
from airflow_provider_finegrained.spark.process import SparkSubmitProcess, run_spark_submit
from airflow_provider_finegrained.spark.process_tree import process_group_members
from airflow_provider_finegrained.spark.submit import (
    SubmitRequest,
    build_spark_submit_command,
    build_spark_submit_env,
    spark_submit_command,
)

pytestmark = [pytest.mark.slow, pytest.mark.spark]

REPO_ROOT = str(Path(__file__).resolve().parents[2])
SUBMIT_TIMEOUT_S = 300.0


def _submit(app: Path, args: list[str], conf: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    check_java()
    request = SubmitRequest(
        application=str(app),
        master="local[2]",
        name=app.stem,
        conf={"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2", **(conf or {})},
        application_args=args,
        driver_memory="768m",
        # PYTHONPATH lets the driver import this provider even where it is not installed.
        env={"SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": REPO_ROOT},
    )
    return build_spark_submit_command(request), build_spark_submit_env(request)


def _write_app(tmp_path: Path, name: str, body: str) -> Path:
    app = tmp_path / name
    app.write_text(textwrap.dedent(body))
    return app


def _processes_mentioning(text: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmdline = " ".join(proc.info["cmdline"] or [])
        if text in cmdline and proc.info["status"] != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


def test_app_writes_and_commits_its_output(tmp_path: Path) -> None:
    app = _write_app(
        tmp_path,
        "write_app.py",
        """
        import json, sys
        from pyspark.sql import SparkSession
        from airflow_provider_finegrained.runtime.output_commit import write_and_commit

        spark = SparkSession.builder.getOrCreate()
        print(f"finegrained: application id {spark.sparkContext.applicationId}", flush=True)
        df = spark.range(0, 10000, numPartitions=4).selectExpr("id", "id % 7 AS k", "repeat('x', 20) AS s")
        committed = write_and_commit(df, sys.argv[1])
        # One write: unbuffered (the launcher sets PYTHONUNBUFFERED), print writes the newline apart and a JVM log
        # line on the merged output could land between the two.
        sys.stdout.write("COMMITTED " + json.dumps(committed.to_dict()) + "\\n")
        sys.stdout.flush()
        spark.stop()
        """,
    )
    root = tmp_path / "storage"
    location = output_location(str(root), "e2e_dag", "manual__2026-11-22T01:02:03+00:00", "write", 1)
    command, env = _submit(app, [location])
    lines: list[str] = []
    ids: list[str] = []
    process = SparkSubmitProcess(command, env, lines.append, app_id_callback=ids.append, timeout=SUBMIT_TIMEOUT_S)
    process.start()
    result = process.wait()

    assert result.returncode == 0, "\n".join(result.tail)
    assert result.application_id is not None and result.application_id.startswith("local-")
    assert ids == [result.application_id]
    assert any("INFO SparkContext: Running Spark version" in line for line in lines)

    reported = CommittedOutput.from_dict(
        json.loads(next(line for line in lines if line.startswith("COMMITTED ")).removeprefix("COMMITTED "))
    )
    committed = read_committed(location)
    assert committed == reported
    assert committed.path == location and committed.format == "parquet"
    assert committed.rows == 10000
    assert len(committed.files) == 4
    sizes = [os.path.getsize(os.path.join(location, name)) for name in committed.files]
    assert committed.partition_bytes == sizes
    on_disk = [
        entry.stat().st_size
        for entry in os.scandir(os.path.join(location, committed.attempt))
        if entry.name.startswith("part-") and entry.name.endswith(".parquet")
    ]
    assert sorted(on_disk) == sorted(sizes)
    assert os.listdir(os.path.dirname(location)) == ["try=1"]
    assert process.pid is not None and process_group_members(process.pid) == []


def test_kill_stops_every_process_and_publishes_nothing(tmp_path: Path) -> None:
    app = _write_app(
        tmp_path,
        "sleep_app.py",
        """
        import sys, time
        from pyspark.sql import SparkSession
        from pyspark.sql.functions import udf
        from airflow_provider_finegrained.runtime.output_commit import write_and_commit

        spark = SparkSession.builder.getOrCreate()

        @udf("long")
        def slow(value):
            time.sleep(600)
            return value

        print("writing", flush=True)
        write_and_commit(spark.range(0, 4, numPartitions=2).select(slow("id").alias("id")), sys.argv[1])
        print("published: the kill came too late", flush=True)
        """,
    )
    root = tmp_path / "storage"
    location = output_location(str(root), "e2e_dag", "run1", "sleepy", 1)
    stage = stage_folder(str(root), "e2e_dag", "run1", "sleepy")
    events = tmp_path / "events"
    events.mkdir()
    # With the event log on, Spark itself logs the local application id ("Logging events to …").
    command, env = _submit(
        app, [location], conf={"spark.eventLog.enabled": "true", "spark.eventLog.dir": f"file://{events}"}
    )
    lines: list[str] = []
    seen_id = threading.Event()
    process = SparkSubmitProcess(command, env, lines.append, app_id_callback=lambda _id: seen_id.set())
    process.start()
    pid = process.pid
    assert pid is not None
    results = []
    waiter = threading.Thread(target=lambda: results.append(process.wait()), daemon=True)
    waiter.start()
    try:
        assert seen_id.wait(120), "\n".join(lines[-30:])
        # Wait until the UDF runs in Python workers forked by the JVM, so the kill meets a busy tree.
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            staging = os.listdir(stage) if os.path.isdir(stage) else []
            workers = [p for p in _processes_mentioning("pyspark.daemon") if p.pid in process_group_members(pid)]
            if staging and workers:
                break
            time.sleep(0.5)
        else:
            pytest.fail("the slow Spark job never started:\n" + "\n".join(lines[-30:]))
        members = process_group_members(pid)
        kinds = {psutil.Process(m).name() for m in members}
        assert "java" in kinds and any(k.startswith("python") for k in kinds), kinds
    finally:
        report = process.kill()
    waiter.join(60)
    assert not waiter.is_alive()
    result = results[0]
    assert result.killed
    assert result.application_id is not None and result.application_id.startswith("local-")
    assert report is not None

    assert process_group_members(pid) == []
    for member in members:
        assert not psutil.pid_exists(member) or psutil.Process(member).status() == psutil.STATUS_ZOMBIE
    assert _processes_mentioning(str(app)) == []
    assert _processes_mentioning(str(location)) == []

    assert not any("published" in line for line in lines)
    assert not os.path.exists(os.path.join(location, MARKER))
    with pytest.raises(OutputNotCommittedError, match="has no _COMMITTED marker"):
        read_committed(location)
    assert cleanup_uncommitted(stage) == [location]  # the try's folder: its attempt never committed
    assert os.listdir(stage) == []


def test_failing_app_returns_its_code_and_traceback(tmp_path: Path) -> None:
    app = _write_app(
        tmp_path,
        "failing_app.py",
        """
        from pyspark.sql import SparkSession

        spark = SparkSession.builder.getOrCreate()

        def explode(value):
            raise ValueError(f"stage exploded on purpose at {value}")

        spark.sparkContext.parallelize([1], 1).map(explode).collect()
        """,
    )
    command, env = _submit(app, [])
    lines: list[str] = []
    result = run_spark_submit(command, env, lines.append, timeout=SUBMIT_TIMEOUT_S)
    assert result.returncode != 0
    assert not result.killed
    assert any(line.startswith("Traceback (most recent call last):") for line in lines)
    assert any("ValueError: stage exploded on purpose at 1" in line for line in lines)
    assert any("ValueError: stage exploded on purpose" in line for line in result.tail)
    assert len(result.tail) == 50


def test_secret_properties_file_keeps_spark_defaults_and_precedence(tmp_path: Path) -> None:
    """--properties-file with --load-spark-defaults: spark-defaults.conf still applies, under the file and --conf."""
    conf_dir = tmp_path / "conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(
        "spark.finegrained.from.defaults yes\n"
        "spark.finegrained.db.password from-defaults\n"
        "spark.finegrained.public.setting from-defaults\n"
    )
    app = _write_app(
        tmp_path,
        "conf_app.py",
        """
        import json, sys
        from pyspark.sql import SparkSession

        conf = SparkSession.builder.getOrCreate().sparkContext.getConf()
        keys = ["spark.finegrained.from.defaults", "spark.finegrained.db.password", "spark.finegrained.public.setting"]
        sys.stdout.write("CONF " + json.dumps({key: conf.get(key, None) for key in keys}) + "\\n")  # one write
        sys.stdout.flush()
        """,
    )
    check_java()
    request = SubmitRequest(
        application=str(app),
        master="local[1]",
        conf={
            "spark.ui.enabled": "false",
            "spark.finegrained.db.password": "from-the-file",
            "spark.finegrained.public.setting": "from-conf",
        },
        env={"SPARK_LOCAL_IP": "127.0.0.1", "PYTHONPATH": REPO_ROOT, "SPARK_CONF_DIR": str(conf_dir)},
    )
    lines: list[str] = []
    with spark_submit_command(request) as command:
        assert "from-the-file" not in " ".join(command)
        result = run_spark_submit(command, build_spark_submit_env(request), lines.append, timeout=SUBMIT_TIMEOUT_S)
    assert result.returncode == 0, "\n".join(result.tail)
    seen = json.loads(next(line for line in lines if line.startswith("CONF ")).removeprefix("CONF "))
    assert seen == {
        "spark.finegrained.from.defaults": "yes",
        "spark.finegrained.db.password": "from-the-file",
        "spark.finegrained.public.setting": "from-conf",
    }
