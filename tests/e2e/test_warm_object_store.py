"""A warm region on an ``s3://`` storage root: a local Spark Connect pool writes through S3A to moto.

The credentials come from ``storage_conn_id`` (an ``aws`` connection) only: fsspec's defaults reach no
store here. The pool's server gets them as the ``spark.hadoop.fs.s3a.*`` settings a cold region's
application gets (the secret ones through its properties file, never its command line), they are part
of the pool's identity (a pool started without them, or with others, is not reused), and the task's side
reads the region's job, statuses and commit markers with them. The region runs once in the pool's ready
driver and once in the task process.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from tests.conftest import S3_BUCKET, S3_SECRET, embedded_settings, s3_options
from tests.warm.conftest import server_jvms, wait_until
from tests.warm.remote_root import CARRIERS, assert_committed, run_in, write_raw

pytestmark = pytest.mark.slow

DAG_ID = "warm_on_s3"
ACCESS_KEY = "moto-access-key"
ROOT = f"s3://{S3_BUCKET}/warm-s3/fg"


@pytest.fixture
def warm_on_s3(
    airflow_db: None,
    moto_endpoint: str,
    s3a_jars: list[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[str]:
    """The default connection: local[2], warm_pool auto, an s3:// root with storage_conn_id; the pool's folder."""
    from airflow_provider_finegrained import warm

    # The auto pool of a remote root lives in the temp folder: this test's own (short: the ready driver's socket).
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path_factory.mktemp("t")))
    # S3A addresses a host-name endpoint as a MinIO or a proxy is reached (tests/e2e/test_object_store_root.py).
    extra = {"endpoint_url": moto_endpoint.replace("//127.0.0.1:", "//localhost:"), "region_name": "eu-west-1"}
    monkeypatch.setenv(
        "AIRFLOW_CONN_LAKE",
        json.dumps({"conn_type": "aws", "login": ACCESS_KEY, "password": S3_SECRET, "extra": extra}),
    )
    connection = {
        "storage_root": ROOT,
        "storage_conn_id": "lake",
        "warm_pool": "auto",
        "warm_idle_timeout": 3600,
        "driver_memory": "1g",
        "spark_conf": {"spark.jars": ",".join(s3a_jars)},
    }
    monkeypatch.setenv(
        "AIRFLOW_CONN_FINEGRAINED_SPARK_DEFAULT",
        json.dumps({"conn_type": "finegrained_spark", "host": "local[2]", "extra": connection}),
    )
    folder = warm.auto_folder(embedded_settings())
    assert folder.startswith(str(tempfile.tempdir)), folder
    try:
        yield folder
    finally:
        warm.stop(folder)
        assert warm.status(folder) is None
        assert server_jvms(folder) == []


def _files_text(folder: str) -> str:
    """Everything the pool's folder holds (state, logs, leases...), as text."""
    return "\n".join(
        path.read_bytes().decode("utf-8", errors="replace") for path in Path(folder).rglob("*") if path.is_file()
    )


@pytest.mark.security
def test_a_warm_region_reads_and_commits_an_s3_root_with_the_storage_connections_credentials(
    warm_on_s3: str, moto_endpoint: str, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from airflow_provider_finegrained import warm
    from airflow_provider_finegrained.warm.driver_protocol import SOCKET_NAME

    folder = warm_on_s3
    options = s3_options(moto_endpoint)
    raw = f"{ROOT.rsplit('/', 1)[0]}/raw/part-0.parquet"
    write_raw(raw, options)
    settings = embedded_settings()

    # A pool in the same folder without the storage connection's credentials (fsspec's and S3A's defaults
    # reach nothing here): not the pool this connection's regions may use.
    blind = warm.ensure_started(settings, storage_options={})
    blind_state = warm.status(folder)
    assert blind_state is not None and blind_state["storage"] is None
    # Started with the connection's credentials (what `airflow finegrained warm start` does): it replaces that one.
    pool = warm.ensure_started(settings)
    assert pool.url != blind.url
    assert not any(pid in psutil.pids() for pid in blind_state["pids"])
    wait_until(lambda: (Path(folder) / SOCKET_NAME).exists(), 120, "the pool's ready driver")
    (server,) = server_jvms(folder)
    # The S3A settings reached the server, the secret ones not through its command line.
    command = psutil.Process(server).cmdline()
    endpoint = [arg for arg in command if arg.startswith("spark.hadoop.fs.s3a.endpoint=")]
    assert endpoint and endpoint[0].endswith(moto_endpoint.rsplit(":", 1)[1]), command
    assert not [arg for arg in command if S3_SECRET in arg or ACCESS_KEY in arg], command
    assert "--properties-file" in command

    runs = {}
    for carrier in CARRIERS:
        run, results, out = run_in(carrier, DAG_ID, raw, monkeypatch, capfd)
        runs[carrier] = run.run_id
        for stage, result in results.items():
            execution = result["trace"]["execution"]
            # The pool started above, reused: the regions asked for the same credentials.
            assert execution["mode"] == "warm" and execution["pool"] == pool.url, (stage, execution)
        assert_committed(results, f"{ROOT}/{DAG_ID}/", options)
        assert S3_SECRET not in out
        assert S3_SECRET not in json.dumps(results, default=str)
    assert runs["ready driver"] != runs["task process"]

    # The pool's identity holds a digest of its credentials, never them; nothing in its folder does.
    state = warm.status(folder)
    assert state is not None and state["url"] == pool.url
    assert isinstance(state["storage"], str) and len(state["storage"]) == 64
    assert S3_SECRET not in _files_text(folder) and ACCESS_KEY not in json.dumps(state)

    # Other credentials: not this pool while a region holds it (the region runs cold), a new pool once idle.
    other = {**options, "secret": "another-secret-key"}
    with warm.in_use(pool), pytest.raises(warm.WarmPoolUnavailable, match="other storage credentials"):
        warm.ensure_started(settings, storage_options=other)
    again = warm.ensure_started(settings, storage_options=other)
    assert again.url != pool.url
    assert "another-secret-key" not in _files_text(folder)
