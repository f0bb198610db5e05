"""storage_conn_id -> fsspec storage options: the mapping per scheme (pure) and the hook against a real S3 API.

The S3 API is moto in server mode on 127.0.0.1 (tests/hooks/conftest.py); the connections are real Airflow
connections defined through ``AIRFLOW_CONN_*`` environment variables, read by the hook as a task would.
"""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from airflow.sdk._shared.secrets_masker import SecretsMasker, _secrets_masker

from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook
from airflow_provider_finegrained.hooks.storage_options import StorageConnection, storage_options
from airflow_provider_finegrained.settings import ConnectionSettingsError

ACCESS_KEY = "AKIDSTORAGEEXAMPLE"
SECRET_KEY = "storage-secret-key-7c1f0e"
SESSION_TOKEN = "storage-session-token-92ab"


# -- the mapping, per scheme ------------------------------------------------------------------------------


def aws(login: str | None = None, password: str | None = None, **extra: Any) -> StorageConnection:
    return StorageConnection("lake", "aws", login, password, extra)


@pytest.mark.parametrize(
    ("scheme", "conn", "expected"),
    [
        ("s3", aws(ACCESS_KEY, SECRET_KEY), {"key": ACCESS_KEY, "secret": SECRET_KEY}),
        ("s3a", aws(ACCESS_KEY, SECRET_KEY), {"key": ACCESS_KEY, "secret": SECRET_KEY}),
        ("S3N", aws(ACCESS_KEY, SECRET_KEY), {"key": ACCESS_KEY, "secret": SECRET_KEY}),
        (
            "s3",
            aws(aws_access_key_id=ACCESS_KEY, aws_secret_access_key=SECRET_KEY, aws_session_token=SESSION_TOKEN),
            {"key": ACCESS_KEY, "secret": SECRET_KEY, "token": SESSION_TOKEN},
        ),
        (
            "s3",
            aws(ACCESS_KEY, SECRET_KEY, endpoint_url="http://minio:9000", region_name="eu-west-1"),
            {
                "key": ACCESS_KEY,
                "secret": SECRET_KEY,
                "client_kwargs": {"endpoint_url": "http://minio:9000", "region_name": "eu-west-1"},
            },
        ),
        (
            "s3",
            aws(service_config={"s3": {"endpoint_url": "http://ceph:7480"}}, config_kwargs={"signature_version": "s3"}),
            {"client_kwargs": {"endpoint_url": "http://ceph:7480"}, "config_kwargs": {"signature_version": "s3"}},
        ),
        ("s3", aws(), {}),  # no keys: s3fs uses the environment's credentials (instance role, env vars)
        (
            "gs",
            StorageConnection("g", "google_cloud_platform", extra={"key_path": "/keys/sa.json", "project": "lake"}),
            {"token": "/keys/sa.json", "project": "lake"},
        ),
        (
            "gcs",
            StorageConnection(
                "g",
                "google_cloud_platform",
                extra={"extra__google_cloud_platform__keyfile_dict": '{"type": "service_account", "private_key": "k"}'},
            ),
            {"token": {"type": "service_account", "private_key": "k"}},
        ),
        ("file", aws(ACCESS_KEY, SECRET_KEY), {}),
    ],
)
def test_options_per_scheme(scheme: str, conn: StorageConnection, expected: dict[str, Any]) -> None:
    assert storage_options(scheme, conn) == expected


@pytest.mark.parametrize(
    ("scheme", "conn", "expected"),
    [
        ("abfs", aws(ACCESS_KEY, SECRET_KEY), "storage_conn_id: 'lake' cannot be used for a abfs:// storage root"),
        ("hdfs", aws(), "allowed: a storage root on s3://, s3a://, s3n://, gs://, gcs:// (or a local path)"),
        ("s3", aws(ACCESS_KEY), "storage_conn_id: connection 'lake' has an access key id without a secret"),
        (
            "gs",
            StorageConnection("g", "google_cloud_platform", extra={"keyfile_dict": "{oops"}),
            "storage_conn_id: the extra keyfile_dict of connection 'g' is not valid JSON",
        ),
    ],
)
def test_unusable_connections_are_named(scheme: str, conn: StorageConnection, expected: str) -> None:
    with pytest.raises(ConnectionSettingsError) as info:
        storage_options(scheme, conn)
    assert expected in str(info.value)
    assert SECRET_KEY not in str(info.value) and "{oops" not in str(info.value)


def test_storage_connection_repr_hides_credentials() -> None:
    text = repr(aws(ACCESS_KEY, SECRET_KEY, aws_session_token=SESSION_TOKEN))
    assert SECRET_KEY not in text and SESSION_TOKEN not in text


# -- the hook, with connections from the environment and a real S3 API ------------------------------------


@pytest.fixture(autouse=True)
def _no_finegrained_config(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("AIRFLOW__FINEGRAINED__") or name.startswith("AIRFLOW_CONN_"):
            monkeypatch.delenv(name)
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def masked_log(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> Iterator[logging.Logger]:
    """A logger whose records pass through Airflow's secrets masker, as task logs do."""
    monkeypatch.setattr(SecretsMasker, "mask_secrets_in_logs", True)
    masker = _secrets_masker()
    caplog.handler.addFilter(masker)
    caplog.set_level(logging.INFO)
    try:
        yield logging.getLogger("tests.finegrained.storage")
    finally:
        caplog.handler.removeFilter(masker)


def define(monkeypatch: pytest.MonkeyPatch, conn_id: str, conn: dict[str, Any]) -> None:
    monkeypatch.setenv(f"AIRFLOW_CONN_{conn_id.upper()}", json.dumps(conn))


def lake_connections(monkeypatch: pytest.MonkeyPatch, endpoint: str, root: str) -> None:
    define(
        monkeypatch,
        "fg_lake",
        {
            "conn_type": "finegrained_spark",
            "host": "local[1]",
            "extra": {"storage_root": root, "storage_conn_id": "lake_s3"},
        },
    )
    define(
        monkeypatch,
        "lake_s3",
        {
            "conn_type": "aws",
            "login": ACCESS_KEY,
            "password": SECRET_KEY,
            "extra": {"endpoint_url": endpoint, "region_name": "eu-west-1"},
        },
    )


def test_hook_options_reach_a_real_s3_api(monkeypatch: pytest.MonkeyPatch, moto_endpoint: str) -> None:
    import fsspec

    bucket = f"fg-{uuid.uuid4().hex[:10]}"
    lake_connections(monkeypatch, moto_endpoint, f"s3a://{bucket}/finegrained")
    options = FineGrainedSparkHook("fg_lake").storage_options()
    assert options == {
        "key": ACCESS_KEY,
        "secret": SECRET_KEY,
        "client_kwargs": {"endpoint_url": moto_endpoint, "region_name": "eu-west-1"},
    }
    fs, path = fsspec.core.url_to_fs(f"s3a://{bucket}/finegrained/probe.txt", **options)
    fs.mkdir(bucket)
    fs.pipe_file(path, b"written with the storage connection")
    assert fs.cat_file(path) == b"written with the storage connection"
    fs.rm_file(path)
    assert not fs.exists(path)


def test_hook_registers_the_credentials_with_the_masker(
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
    masked_log: logging.Logger,
) -> None:
    # Values of their own: the masker is process-wide, and another test may have registered the module's.
    secret, token = f"mask-probe-secret-{uuid.uuid4().hex}", f"mask-probe-token-{uuid.uuid4().hex}"
    lake_connections(monkeypatch, "http://127.0.0.1:9", "s3://lake/finegrained")
    define(
        monkeypatch,
        "lake_s3",
        {"conn_type": "aws", "extra": {"aws_access_key_id": ACCESS_KEY, "aws_secret_access_key": secret,
                                       "aws_session_token": token}},
    )  # fmt: skip
    masked_log.info("before: %s %s", secret, token)
    assert secret in caplog.text  # not known to the masker yet
    caplog.clear()
    options = FineGrainedSparkHook("fg_lake").storage_options()
    assert (options["secret"], options["token"]) == (secret, token)
    out, err = capfd.readouterr()
    assert secret not in out + err and token not in out + err  # the hook logged no value
    masked_log.info("careless: %s", options)
    masked_log.info("raw: %s %s", secret, token)
    assert secret not in caplog.text and token not in caplog.text
    assert "***" in caplog.text


def test_no_storage_connection_or_a_local_root_gives_no_options(monkeypatch: pytest.MonkeyPatch) -> None:
    define(monkeypatch, "fg_plain", {"conn_type": "finegrained_spark", "host": "local[1]"})
    assert FineGrainedSparkHook("fg_plain").storage_options() == {}
    extra = {"storage_root": "/data/fg", "storage_conn_id": "never_read"}
    define(monkeypatch, "fg_local", {"conn_type": "finegrained_spark", "host": "local[1]", "extra": extra})
    assert FineGrainedSparkHook("fg_local").storage_options() == {}


def test_an_undefined_storage_connection_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = {"storage_root": "s3://lake/fg", "storage_conn_id": "missing_s3"}
    define(monkeypatch, "fg_missing", {"conn_type": "finegrained_spark", "host": "local[1]", "extra": extra})
    with pytest.raises(ConnectionSettingsError) as info:
        FineGrainedSparkHook("fg_missing").storage_options()
    assert "storage_conn_id: connection 'missing_s3' (named by 'fg_missing') is not defined" in str(info.value)


def test_the_storage_connection_may_come_from_the_config_section(
    monkeypatch: pytest.MonkeyPatch, moto_endpoint: str
) -> None:
    lake_connections(monkeypatch, moto_endpoint, "s3://lake/finegrained")
    define(monkeypatch, "fg_lake", {"conn_type": "finegrained_spark", "host": "local[1]"})
    monkeypatch.setenv("AIRFLOW__FINEGRAINED__STORAGE_ROOT", "s3://lake/finegrained")
    monkeypatch.setenv("AIRFLOW__FINEGRAINED__STORAGE_CONN_ID", "lake_s3")
    assert FineGrainedSparkHook("fg_lake").storage_options()["key"] == ACCESS_KEY
