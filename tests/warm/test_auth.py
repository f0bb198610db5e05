"""The warm pool's lock: its token, its file, the URLs clients connect with (no Spark started)."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from airflow_provider_finegrained.settings import ConnectionSettings
from airflow_provider_finegrained.warm import WarmPool
from airflow_provider_finegrained.warm.auth import client_url, new_token, read_token, split_token, write_token
from airflow_provider_finegrained.warm.server import (
    server_command,
    server_env,
    server_secret_conf,
    storage_identity,
    storage_spark_conf,
)
from airflow_provider_finegrained.warm.state import pool_from_state

TOKEN = "s3cr3t-Tok_en"


@pytest.mark.parametrize(
    ("url", "token", "extra", "expected"),
    [
        # A loopback pool with a token is reached as localhost: pyspark speaks TLS to any other host.
        ("sc://127.0.0.1:4242", TOKEN, {}, f"sc://localhost:4242/;token={TOKEN}"),
        ("sc://localhost:4242", TOKEN, {}, f"sc://localhost:4242/;token={TOKEN}"),
        ("sc://127.0.0.1:4242", None, {}, "sc://127.0.0.1:4242"),
        ("sc://spark.example:443/;use_ssl=true", TOKEN, {}, f"sc://spark.example:443/;use_ssl=true;token={TOKEN}"),
        ("sc://spark.example:443/;token=old", "new", {}, "sc://spark.example:443/;token=new"),
        ("sc://127.0.0.1:1", "a;b=c/d", {}, "sc://localhost:1/;token=a%3Bb%3Dc%2Fd"),
        (
            "sc://127.0.0.1:1",
            TOKEN,
            {"session_id": "0b0e7c1e-6a1f-4d7e-9a57-1f3d1c1f2a3b", "user_id": "airflow"},
            f"sc://localhost:1/;token={TOKEN};session_id=0b0e7c1e-6a1f-4d7e-9a57-1f3d1c1f2a3b;user_id=airflow",
        ),
    ],
)
def test_client_url(url: str, token: str | None, extra: dict[str, str], expected: str) -> None:
    assert client_url(url, token, **extra) == expected


@pytest.mark.parametrize(
    ("url", "public", "token"),
    [
        ("sc://h:15002/;token=abc", "sc://h:15002", "abc"),
        ("sc://h:15002/;user_id=u;token=a%3Bb;use_ssl=true", "sc://h:15002/;user_id=u;use_ssl=true", "a;b"),
        ("sc://h:15002", "sc://h:15002", None),
        ("sc://h:15002/;user_id=u", "sc://h:15002/;user_id=u", None),
    ],
)
def test_split_token(url: str, public: str, token: str | None) -> None:
    assert split_token(url) == (public, token)


@pytest.mark.security
def test_the_token_file_is_created_readable_by_its_owner_only(tmp_path: Path) -> None:
    old = os.umask(0)  # the widest umask: the file must still be 0600
    try:
        path = write_token(str(tmp_path), TOKEN)
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert read_token(str(tmp_path)) == TOKEN
    write_token(str(tmp_path), "second")
    assert read_token(str(tmp_path)) == "second" and os.listdir(tmp_path) == ["token"]
    assert len(new_token()) >= 43 and new_token() != new_token()


@pytest.mark.security
def test_the_token_is_in_no_repr_and_no_pool_state(tmp_path: Path) -> None:
    write_token(str(tmp_path), TOKEN)
    pool = pool_from_state(str(tmp_path), {"url": "sc://127.0.0.1:1", "started_at": 1.0})
    assert pool.token == TOKEN
    assert TOKEN not in repr(pool)
    assert pool == WarmPool("sc://127.0.0.1:1", str(tmp_path), None, None, None, 1.0)


@pytest.mark.security
def test_secret_spark_settings_stay_off_the_server_command(tmp_path: Path) -> None:
    from airflow_provider_finegrained.warm import pool_shape

    conf = {
        "spark.hadoop.fs.s3a.secret.key": "hush",
        "spark.authenticate.secret": "hush-hush",
        "spark.sql.session.timeZone": "UTC",
    }
    settings = ConnectionSettings.embedded_default(
        airflow_home=str(tmp_path), defaults={"total_cores": 1, "driver_memory": "1g", "spark_conf": conf}
    )
    command = server_command(settings, pool_shape(settings), 1, 2, "/f")
    assert "spark.sql.session.timeZone=UTC" in command
    # No secret value, no secret key (spark.redaction.regex's value names "secret": it is no key)
    assert not any("hush" in arg or "secret" in arg.partition("=")[0] for arg in command)
    assert server_secret_conf(settings) == {
        "spark.hadoop.fs.s3a.secret.key": "hush",
        "spark.authenticate.secret": "hush-hush",
    }


S3_OPTIONS = {
    "key": "access-key-id",
    "secret": "storage-secret-4711",
    "endpoint_url": "http://127.0.0.1:9000",
    "client_kwargs": {"region_name": "eu-west-1"},
}


@pytest.mark.security
def test_the_storage_connections_credentials_reach_the_server_secrets_through_its_properties_file(
    tmp_path: Path,
) -> None:
    from airflow_provider_finegrained.warm import pool_shape

    conf = {"spark.hadoop.fs.s3a.endpoint.region": "us-east-1"}  # the connection's own spark_conf wins
    settings = ConnectionSettings.embedded_default(
        airflow_home=str(tmp_path),
        defaults={"total_cores": 1, "driver_memory": "1g", "storage_root": "s3://bucket/fg", "spark_conf": conf},
    )
    storage = storage_spark_conf(settings, S3_OPTIONS)
    assert storage["spark.hadoop.fs.s3a.secret.key"] == "storage-secret-4711"
    command = server_command(settings, pool_shape(settings), 1, 2, "/f", storage)
    assert "spark.hadoop.fs.s3a.endpoint=http://127.0.0.1:9000" in command
    assert "spark.hadoop.fs.s3a.endpoint.region=us-east-1" in command
    assert not any("storage-secret" in arg or "access-key-id" in arg for arg in command)
    secret = server_secret_conf(settings, storage)
    assert secret["spark.hadoop.fs.s3a.secret.key"] == "storage-secret-4711"
    assert secret["spark.hadoop.fs.s3a.access.key"] == "access-key-id"


@pytest.mark.security
def test_the_pools_storage_identity_tells_credentials_apart_and_holds_none_of_them(tmp_path: Path) -> None:
    local = ConnectionSettings.embedded_default(airflow_home=str(tmp_path))
    assert storage_identity(local, storage_spark_conf(local, {}), TOKEN) is None
    s3 = ConnectionSettings.embedded_default(airflow_home=str(tmp_path), defaults={"storage_root": "s3://bucket/fg"})
    ours = storage_identity(s3, storage_spark_conf(s3, S3_OPTIONS), TOKEN)
    assert ours is not None and len(ours) == 64 and "storage-secret" not in ours
    assert ours == storage_identity(s3, storage_spark_conf(s3, dict(S3_OPTIONS)), TOKEN)
    others = {**S3_OPTIONS, "secret": "another-secret"}
    assert ours != storage_identity(s3, storage_spark_conf(s3, others), TOKEN)
    assert storage_identity(s3, storage_spark_conf(s3, {}), TOKEN) is None  # started without them: not the same
    assert ours != storage_identity(s3, storage_spark_conf(s3, S3_OPTIONS), "another-pools-token")
    hdfs = ConnectionSettings.embedded_default(
        airflow_home=str(tmp_path), defaults={"storage_root": "hdfs://nn:8020/fg", "hadoop_conf_dir": "/etc/hadoop"}
    )
    assert storage_identity(hdfs, {}, TOKEN) is not None  # another cluster's configuration: another pool
    assert server_env(hdfs, {})["HADOOP_CONF_DIR"] == server_env(hdfs, {})["YARN_CONF_DIR"] == "/etc/hadoop"
    assert "HADOOP_CONF_DIR" not in server_env(local, {})


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("conn:spark connect", "does not name an Airflow connection; allowed: conn:<conn_id>"),
        ("conn:", "does not name an Airflow connection"),
        ("on", "or conn:<conn_id>, an Airflow connection to a Spark Connect server"),
    ],
)
def test_warm_pool_conn_setting_is_checked(tmp_path: Path, value: str, error: str) -> None:
    from airflow_provider_finegrained.settings.coercion import ConnectionSettingsError

    with pytest.raises(ConnectionSettingsError, match=re.escape(error)):
        ConnectionSettings.embedded_default(airflow_home=str(tmp_path), defaults={"warm_pool": value})
    settings = ConnectionSettings.embedded_default(airflow_home=str(tmp_path), defaults={"warm_pool": "conn:my_pool"})
    assert settings.warm_pool == "conn:my_pool"


@pytest.mark.security
def test_the_warm_launcher_registers_the_pools_token_with_airflows_masker(tmp_path: Path) -> None:
    from airflow.sdk._shared.secrets_masker import _secrets_masker

    from airflow_provider_finegrained.launchers.warm import WarmLauncher

    token = new_token()
    pool = WarmPool("sc://127.0.0.1:1", str(tmp_path), None, None, None, 0.0, token=token)
    line = f"connecting to {client_url(pool.url, token)}"
    assert token in str(_secrets_masker().redact(line))
    WarmLauncher(ConnectionSettings.embedded_default(airflow_home=str(tmp_path)), pool)
    assert token not in str(_secrets_masker().redact(line))
