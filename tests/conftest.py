"""Test-wide setup: an isolated AIRFLOW_HOME so tests never touch a user's Airflow."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import pytest

from tests import worker_groups

# Set before anything imports airflow: its configuration is read at import time.
_SUITE_HOME_ENV = "FINEGRAINED_SUITE_AIRFLOW_HOME"
"""The Airflow home of the run's first process (a pytest-xdist controller's, or a plain run's)."""
_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if _WORKER and os.environ.get("AIRFLOW_HOME") == os.environ.get(_SUITE_HOME_ENV):
    # A pytest-xdist worker inherits the controller's environment: its Airflow home (metadata database, DAGs
    # folder, warm pools) is its own, not shared with the other worker. (A process a worker's test starts that
    # imports this module inherits the worker's home, which differs from the controller's: it keeps it.)
    for name in ("AIRFLOW_HOME", "AIRFLOW__CORE__DAGS_FOLDER"):
        os.environ.pop(name, None)
_HOME = Path(tempfile.mkdtemp(prefix="finegrained-airflow-home-"))
os.environ.setdefault("AIRFLOW_HOME", str(_HOME))
if not _WORKER:  # what this run's workers, if any, inherit and replace (a home set beforehand included)
    os.environ[_SUITE_HOME_ENV] = os.environ["AIRFLOW_HOME"]
os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
# dag.test() syncs the DAGs folder (the default bundle) to the database: tests put their DAG files here.
DAGS_FOLDER = _HOME / "dags"
DAGS_FOLDER.mkdir()
os.environ.setdefault("AIRFLOW__CORE__DAGS_FOLDER", str(DAGS_FOLDER))
os.environ.setdefault("AIRFLOW__CORE__UNIT_TEST_MODE", "False")
# The embedded default runs regions warm; the suite tests the cold path (a spark-submit per region)
# unless a test asks for the warm pool (tests/e2e/test_warm.py, tests/warm).
os.environ.setdefault("AIRFLOW__FINEGRAINED__WARM_POOL", "off")
# dag.test() runs triggers in its own process, with no executor event to race (triggers/settle.py): the
# suite's deferrals fire as soon as they can; tests/triggers asserts the floor itself.
os.environ.setdefault("AIRFLOW__FINEGRAINED__TRIGGER_MIN_WAIT", "0")
# Every JVM the tests start (and the JVMs those start) begins faster: see tests/jvm_start.py.
if "JAVA_TOOL_OPTIONS" not in os.environ:
    from airflow_provider_finegrained.spark.java import SparkEnvironmentError
    from tests.jvm_start import archive_path, java_tool_options

    with suppress(OSError, SparkEnvironmentError):  # no Java or Spark yet: the tests that need them say so
        os.environ["JAVA_TOOL_OPTIONS"] = java_tool_options(archive_path())

REPO = Path(__file__).resolve().parent.parent

DURATIONS_FILE_ENV = "FINEGRAINED_DURATIONS_FILE"
"""Set (scripts/test.sh sets it for its last pytest run): where every test phase's duration is written, slowest
first, one ``<seconds>s <phase> <test id>`` a line, so CI keeps where its time went."""


def pytest_terminal_summary(terminalreporter: Any) -> None:
    target = os.environ.get(DURATIONS_FILE_ENV)
    if not target:
        return
    phases = [
        (report.duration, report.when, report.nodeid)
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "when", None) in ("setup", "call", "teardown") and hasattr(report, "duration")
    ]
    phases.sort(key=lambda phase: phase[0], reverse=True)
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(f"{seconds:.2f}s {when} {nodeid}\n" for seconds, when, nodeid in phases))


# -- tiers: what a test starts ------------------------------------------------------------------------

STARTED_BY_FIXTURE: dict[str, tuple[str, ...]] = {
    "airflow_db": ("airflow",),  # `airflow db migrate`; dag.test() and the CLI need it
    "api_server": ("airflow",),
    "prefixed_api_server": ("airflow",),
    "browser": ("browser",),
    "standalone_cluster": ("cluster",),
    "hadoop_cluster": ("hadoop",),
    # A Spark Connect server in local mode: the embedded default's warm pool, tests/warm's shared one.
    "_embedded_warm_pool": ("spark",),
    "shared_pool": ("spark",),
    # A module's own local SparkSession (tests/runtime, tests/spark, tests/tpch).
    "spark": ("spark",),
    "classic_spark": ("spark",),
}
"""Tier markers (pyproject.toml's ``markers``) given to every test that uses one of these fixtures, directly or
through another fixture; tests that start something themselves carry the marker in their module."""

STARTED_IN_FOLDER: dict[str, tuple[str, ...]] = {
    "e2e": ("spark",),  # stages under dag.test() on the embedded local Spark
    "cluster": ("cluster",),
}
"""Tier markers of every test in a folder of tests/ (what its modules are about)."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = getattr(item, "fixturenames", ())
        started = {marker for name in names for marker in STARTED_BY_FIXTURE.get(name, ())}
        parts = item.path.resolve().parts
        if len(parts) > 2 and parts[-3] == "tests":
            started.update(STARTED_IN_FOLDER.get(parts[-2], ()))
        for marker in sorted(started - {mark.name for mark in item.iter_markers()}):
            item.add_marker(marker)
    worker_groups.write_groups(items, REPO)


# -- two workers (scripts/test.sh): tests sharing a cluster or a pool in one (tests/worker_groups.py) -----


def pytest_configure(config: pytest.Config) -> None:
    worker_groups.name_groups_folder(config)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return worker_groups.make_scheduler(config, log) if config.getoption("dist") == "loadgroup" else None


@pytest.fixture(scope="session")
def airflow_db() -> None:
    """A migrated SQLite metadata database in the tests' AIRFLOW_HOME."""
    airflow = str(Path(sys.executable).parent / "airflow")
    subprocess.run([airflow, "db", "migrate"], check=True, capture_output=True, env=os.environ.copy(), timeout=600)


@pytest.fixture(scope="session")
def tpch_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """TPC-H tables at scale factor 0.01 (parquet, from tpchgen-cli), generated once per session."""
    sys.path.insert(0, str(REPO / "dags_examples"))
    from tpch_data import generate

    out = tmp_path_factory.mktemp("tpch-sf0.01")
    generate(0.01, out)
    return out


@pytest.fixture(autouse=True)
def _no_connect_client_left_behind() -> Iterator[None]:
    """A test that opened a Spark Connect session leaves no Connect-client marks for the next test's classic
    session (pyspark records them in os.environ)."""
    from airflow_provider_finegrained.spark.submit import connect_client_env_restored

    with connect_client_env_restored():
        yield


WARM_ENV = {"AIRFLOW__FINEGRAINED__WARM_POOL": "auto", "AIRFLOW__FINEGRAINED__WARM_IDLE_TIMEOUT": "3600"}


def embedded_settings() -> Any:
    from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook

    return FineGrainedSparkHook().get_settings()


@contextmanager
def warm_embedded_default() -> Iterator[None]:
    """The embedded default in warm mode while inside; the environment as it was after."""
    from airflow_provider_finegrained.spark.submit import environ_restored

    with environ_restored(WARM_ENV):
        os.environ.update(WARM_ENV)
        yield


@pytest.fixture(scope="session")
def _embedded_warm_pool(airflow_db: None) -> Iterator[str]:
    """The embedded default's pool folder, shared by every module that runs warm (a pool start costs a
    Spark application's start-up); the pool is stopped, and checked gone, when the session ends."""
    from airflow_provider_finegrained import warm

    with warm_embedded_default():
        folder = warm.auto_folder(embedded_settings())
    try:
        yield folder
    finally:
        warm.stop(folder)
        assert warm.status(folder) is None


@pytest.fixture(scope="module")
def warm_pool_folder(_embedded_warm_pool: str) -> Iterator[str]:
    """Warm mode for the embedded default in this module; its pool starts with the first warm region."""
    with warm_embedded_default():
        yield _embedded_warm_pool


# -- a real S3 API on loopback ------------------------------------------------------------------------

S3_BUCKET = "finegrained-tests"
S3_SECRET = "moto-secret-key-not-for-logs"


def s3_options(endpoint: str) -> dict[str, Any]:
    """s3fs options for the session's moto server: static keys, its endpoint, a region."""
    return {
        "key": "moto-access-key",
        "secret": S3_SECRET,
        "endpoint_url": endpoint,
        "client_kwargs": {"region_name": "eu-west-1"},
    }


HADOOP_SERVICES_JVM_OPTIONS = "-Djdk.lang.Process.launchMechanism=VFORK"
"""For the loopback Hadoop JVM: without Hadoop's native library (not on Maven Central) a NodeManager sets the
permissions of every file it localizes with a ``chmod`` process of its own, about 38,000 for the Python
environment tests/hadoop/test_yarn_python_env.py ships; vfork starts each a third faster than Java's default
(posix_spawn through a helper)."""


@contextmanager
def _services_jvm_options(options: str) -> Iterator[None]:
    """``JDK_JAVA_OPTIONS`` (read by the ``java`` launcher alone) set while a services' JVM is started."""
    before = os.environ.get("JDK_JAVA_OPTIONS")
    os.environ["JDK_JAVA_OPTIONS"] = options
    try:
        yield
    finally:
        if before is None:
            del os.environ["JDK_JAVA_OPTIONS"]
        else:
            os.environ["JDK_JAVA_OPTIONS"] = before


@pytest.fixture(scope="session")
def hadoop_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real Hadoop cluster on 127.0.0.1 for the session: HDFS (WebHDFS on) and YARN with two NodeManagers of
    2 vcores and 4 GiB (spark/hadoop_cluster.py; its jars come from Maven Central once, into ~/.m2)."""
    import psutil

    from airflow_provider_finegrained.spark.hadoop_cluster import start_hadoop_cluster

    with _services_jvm_options(HADOOP_SERVICES_JVM_OPTIONS):
        cluster = start_hadoop_cluster(str(tmp_path_factory.mktemp("hadoop")), nodemanagers=2, vcores_per_node=2)
    try:
        yield cluster
    finally:
        cluster.stop()
        assert not psutil.pid_exists(cluster.pid) or psutil.Process(cluster.pid).status() == psutil.STATUS_ZOMBIE


@pytest.fixture(scope="session")
def standalone_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A real Spark standalone cluster on 127.0.0.1 (2 workers x 2 cores x 4g) for the session: tests/cluster's,
    and the warm pool's on a cluster (tests/warm/test_standalone.py), one cluster start for both."""
    from airflow_provider_finegrained.spark.standalone_start import start_local_cluster
    from tests.cluster.conftest import assert_all_gone

    work_dir: Path = tmp_path_factory.mktemp("standalone")
    cluster = start_local_cluster(str(work_dir), workers=2, cores_per_worker=2, memory_per_worker="4g")
    try:
        yield cluster
    finally:
        # Whatever the tests left running (drivers, executors) is part of the cluster and goes with it.
        pids = [p.pid for p in cluster.processes()]
        cluster.stop()
        assert cluster.processes() == []
        assert_all_gone(pids)


@pytest.fixture(scope="session")
def moto_endpoint() -> Iterator[str]:
    """The URL of a moto S3 server on 127.0.0.1 (a free port) with the bucket ``S3_BUCKET``, for the session.

    One server for every module: moto keeps its buckets in the process, so servers started side by side
    would share them anyway.
    """
    import logging

    import s3fs
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        s3fs.S3FileSystem(**s3_options(endpoint)).makedirs(S3_BUCKET, exist_ok=True)
        yield endpoint
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3a_jars() -> list[str]:
    """hadoop-aws at the Hadoop version pyspark bundles, with its dependencies (the AWS SDK bundle...), for
    ``spark.jars``: resolved by ``mvn`` from Maven Central once (into ~/.m2), then from the cached classpath."""
    from airflow_provider_finegrained.spark.hadoop_cluster import bundled_hadoop_version
    from airflow_provider_finegrained.storage.classpath import s3a_jars

    return s3a_jars(bundled_hadoop_version())
