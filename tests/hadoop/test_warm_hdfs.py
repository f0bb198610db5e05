"""A warm region on an ``hdfs://`` storage root: local Spark Connect pool, the session's loopback HDFS.

The connection names the cluster only through ``hadoop_conf_dir`` (HADOOP_CONF_DIR is unset here): the
pool's server must get it (and the NameNode's web address, which the region's Python side uses to reach
the job, the commit markers and the statuses over WebHDFS) as a spark-submit of the cold path does.
The region runs once in the pool's ready driver and once in the task process.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from airflow_provider_finegrained.spark.hadoop_cluster import HadoopCluster
from tests.conftest import embedded_settings
from tests.warm.conftest import server_jvms, wait_until
from tests.warm.remote_root import CARRIERS, assert_committed, run_in, write_raw

pytestmark = [pytest.mark.slow, pytest.mark.hadoop]

DAG_ID = "warm_on_hdfs"


@pytest.fixture
def warm_on_hdfs(
    hadoop_cluster: HadoopCluster,
    airflow_db: None,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[HadoopCluster, str]]:
    """The default connection: local[2], warm_pool auto, an hdfs:// root; the pool's folder, stopped after."""
    from airflow_provider_finegrained import warm

    cluster = hadoop_cluster
    # The auto pool of a remote root lives in the temp folder: this test's own (short: the ready driver's socket).
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path_factory.mktemp("t")))
    monkeypatch.delenv("HADOOP_CONF_DIR", raising=False)  # the connection's hadoop_conf_dir must be enough
    monkeypatch.delenv("YARN_CONF_DIR", raising=False)
    extra = {
        "hadoop_conf_dir": cluster.conf_dir,
        "storage_root": cluster.storage_root("/warm-hdfs/fg"),
        "warm_pool": "auto",
        "warm_idle_timeout": 3600,
        "driver_memory": "1g",
    }
    monkeypatch.setenv(
        "AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT",
        json.dumps({"conn_type": "finegrained_spark", "host": "local[2]", "extra": extra}),
    )
    folder = warm.auto_folder(embedded_settings())
    assert folder.startswith(str(tempfile.tempdir)), folder
    try:
        yield cluster, folder
    finally:
        warm.stop(folder)
        assert warm.status(folder) is None
        assert server_jvms(folder) == []


def test_a_warm_region_reads_and_commits_an_hdfs_root(
    warm_on_hdfs: tuple[HadoopCluster, str], monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from airflow_provider_finegrained import warm
    from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook
    from airflow_provider_finegrained.warm.driver_protocol import SOCKET_NAME

    cluster, folder = warm_on_hdfs
    options = {"webhdfs_url": cluster.namenode_http_url}
    raw = cluster.storage_root("/warm-hdfs/raw/part-0.parquet")
    write_raw(raw, options)

    # The pool as `airflow finegrained warm start` starts it (the connection's settings alone): the regions below
    # must find it the one they want, and its ready driver listening.
    pool = warm.ensure_started(FineGrainedSparkHook().get_settings())
    wait_until(lambda: (Path(folder) / SOCKET_NAME).exists(), 120, "the pool's ready driver")

    # The server got the cluster's configuration folder and the NameNode's web address, as a cold submit does.
    (server,) = server_jvms(folder)
    environ = psutil.Process(server).environ()
    assert environ.get("HADOOP_CONF_DIR") == environ.get("YARN_CONF_DIR") == cluster.conf_dir
    address = cluster.namenode_http_url.removeprefix("http://")
    assert f"spark.hadoop.dfs.namenode.http-address={address}" in psutil.Process(server).cmdline()

    runs = {}
    for carrier in CARRIERS:
        run, results, _ = run_in(carrier, DAG_ID, raw, monkeypatch, capfd)
        runs[carrier] = run.run_id
        for stage, result in results.items():
            execution = result["trace"]["execution"]
            assert execution["mode"] == "warm" and execution["pool"] == pool.url, (stage, execution)
            assert result["trace"]["application_id"] == pool.application_id
        # The outputs are committed on HDFS; the markers read back over WebHDFS with the connection's options.
        assert_committed(results, cluster.storage_root("/warm-hdfs/fg"), options)
        assert results["counts"]["output"]["in_memory_only"] is True
    assert runs["ready driver"] != runs["task process"]
    # Both runs in the one pool started above.
    state = warm.status(folder)
    assert state is not None and state["url"] == pool.url
