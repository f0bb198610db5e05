"""Storage credentials as Spark's Hadoop settings and back: tables of cases, and every secret masked."""

from __future__ import annotations

from typing import Any

import pytest

from airflow_provider_finegrained.secrets import SECRET_KEY_PATTERN
from airflow_provider_finegrained.spark.submit import is_secret_key
from airflow_provider_finegrained.storage.errors import StorageConfigError
from airflow_provider_finegrained.storage.hadoop_conf import fsspec_options, spark_hadoop_conf

H = "spark.hadoop."
HOST = "acct.dfs.core.windows.net"

CASES: list[tuple[str, dict[str, Any], dict[str, str]]] = [
    (
        "s3",
        {"key": "AKIAEXAMPLE", "secret": "s3-secret"},
        {H + "fs.s3a.access.key": "AKIAEXAMPLE", H + "fs.s3a.secret.key": "s3-secret"},
    ),
    (
        "s3a",
        {
            "key": "AKIAEXAMPLE",
            "secret": "s3-secret",
            "token": "session-token",
            "endpoint_url": "http://127.0.0.1:9000",
            "client_kwargs": {"region_name": "eu-west-1"},
            "requester_pays": True,
        },
        {
            H + "fs.s3a.access.key": "AKIAEXAMPLE",
            H + "fs.s3a.secret.key": "s3-secret",
            H + "fs.s3a.session.token": "session-token",
            H + "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider",
            H + "fs.s3a.endpoint": "http://127.0.0.1:9000",
            H + "fs.s3a.connection.ssl.enabled": "false",
            H + "fs.s3a.endpoint.region": "eu-west-1",
            H + "fs.s3a.path.style.access": "true",
            H + "fs.s3a.requester.pays.enabled": "true",
        },
    ),
    (
        "s3",
        {"anon": True, "endpoint_url": "https://s3.example.com"},
        {
            H + "fs.s3a.aws.credentials.provider": "org.apache.hadoop.fs.s3a.AnonymousAWSCredentialsProvider",
            H + "fs.s3a.endpoint": "https://s3.example.com",
            H + "fs.s3a.path.style.access": "true",
        },
    ),
    (
        "s3",
        {"endpoint_url": "http://localhost:9000", "config_kwargs": {"s3": {"addressing_style": "virtual"}}},
        {
            H + "fs.s3a.endpoint": "http://localhost:9000",
            H + "fs.s3a.connection.ssl.enabled": "false",
            H + "fs.s3a.path.style.access": "false",
        },
    ),
    ("s3", {"config_kwargs": {"s3": {"addressing_style": "path"}}}, {H + "fs.s3a.path.style.access": "true"}),
    (
        "gs",
        {"token": "/secrets/sa.json", "project": "my-project"},
        {
            H + "fs.gs.auth.type": "SERVICE_ACCOUNT_JSON_KEYFILE",
            H + "fs.gs.auth.service.account.json.keyfile": "/secrets/sa.json",
            H + "fs.gs.project.id": "my-project",
        },
    ),
    ("gs", {"token": "anon"}, {H + "fs.gs.auth.type": "UNAUTHENTICATED"}),
    ("gs", {"token": "google_default"}, {H + "fs.gs.auth.type": "APPLICATION_DEFAULT"}),
    ("gs", {"token": "cloud"}, {H + "fs.gs.auth.type": "COMPUTE_ENGINE"}),
    ("abfs", {"account_name": "acct", "account_key": "azure-key"}, {H + f"fs.azure.account.key.{HOST}": "azure-key"}),
    (
        "abfss",
        {"account_name": "acct", "tenant_id": "t-1", "client_id": "c-1", "client_secret": "sp-secret"},
        {
            H + f"fs.azure.account.auth.type.{HOST}": "OAuth",
            H + f"fs.azure.account.oauth.provider.type.{HOST}": (
                "org.apache.hadoop.fs.azurebfs.oauth2.ClientCredsTokenProvider"
            ),
            H + f"fs.azure.account.oauth2.client.id.{HOST}": "c-1",
            H + f"fs.azure.account.oauth2.client.secret.{HOST}": "sp-secret",
            H + f"fs.azure.account.oauth2.client.endpoint.{HOST}": "https://login.microsoftonline.com/t-1/oauth2/token",
        },
    ),
    # HDFS: Spark needs nothing; the NameNode's web address travels for the driver's Python (WebHDFS).
    ("hdfs", {"webhdfs_url": "http://nn.example:9870"}, {H + "dfs.namenode.http-address": "nn.example:9870"}),
    ("hdfs", {"webhdfs_url": "https://nn.example:9871"}, {H + "dfs.namenode.https-address": "nn.example:9871"}),
]
SECRETS = {"s3-secret", "session-token", "AKIAEXAMPLE", "azure-key", "sp-secret"}


@pytest.mark.parametrize(("scheme", "options", "expected"), CASES)
def test_options_become_spark_hadoop_settings(scheme: str, options: dict[str, Any], expected: dict[str, str]) -> None:
    assert spark_hadoop_conf(scheme, options) == expected


@pytest.mark.parametrize(("scheme", "options", "expected"), CASES)
def test_settings_become_options_again(scheme: str, options: dict[str, Any], expected: dict[str, str]) -> None:
    assert fsspec_options(scheme, expected) == options
    # The driver's Hadoop configuration has the keys without the spark.hadoop. prefix.
    assert fsspec_options(scheme, {k.removeprefix(H): v for k, v in expected.items()}) == options


@pytest.mark.parametrize(("scheme", "options", "expected"), CASES)
@pytest.mark.security
def test_every_secret_value_is_under_a_masked_key(
    scheme: str, options: dict[str, Any], expected: dict[str, str]
) -> None:
    for key, value in spark_hadoop_conf(scheme, options).items():
        if value in SECRETS:
            assert is_secret_key(key), key
            assert SECRET_KEY_PATTERN.search(key), key
    # And what is not secret stays readable in logs.
    for readable in ("fs.s3a.endpoint", "fs.s3a.endpoint.region", "fs.gs.project.id", "fs.gs.auth.type"):
        assert not is_secret_key(H + readable)


@pytest.mark.parametrize(
    ("options", "path_style"),
    [
        # botocore (s3fs) addresses any custom endpoint by path; S3A puts the bucket into a host name
        # (measured: bucket.localhost does not resolve), so an endpoint means path style on both sides.
        ({"endpoint_url": "http://localhost:9000"}, "true"),
        ({"client_kwargs": {"endpoint_url": "http://minio.internal:9000"}}, "true"),
        ({"endpoint_url": "http://localhost:9000", "config_kwargs": {"s3": {"addressing_style": "path"}}}, "true"),
        ({"endpoint_url": "http://localhost:9000", "config_kwargs": {"s3": {"addressing_style": "virtual"}}}, "false"),
        ({"key": "k", "secret": "s"}, None),  # AWS itself: S3A's and botocore's defaults agree
    ],
)
def test_an_s3_endpoint_is_addressed_by_path_as_botocore_does(options: dict[str, Any], path_style: str | None) -> None:
    conf = spark_hadoop_conf("s3", options)
    assert conf.get(H + "fs.s3a.path.style.access") == path_style
    # The driver's options (back from these settings) make botocore address the store the same way.
    again = fsspec_options("s3", conf)
    style = (again.get("config_kwargs") or {}).get("s3", {}).get("addressing_style")
    botocore_style = style or ("path" if again.get("endpoint_url") else "virtual")
    assert botocore_style == ("path" if path_style == "true" else "virtual")


@pytest.mark.parametrize(
    ("scheme", "options"),
    [
        ("file", {}),
        ("hdfs", {"user": "etl"}),
        ("memory", {"anything": 1}),
        ("s3", {}),
        ("s3", None),
        ("abfs", {}),
        ("s3", {"use_listings_cache": False, "skip_instance_cache": True}),
    ],
)
def test_nothing_to_map(scheme: str, options: dict[str, Any] | None) -> None:
    assert spark_hadoop_conf(scheme, options) == {}


def test_fsspec_options_ignore_other_settings() -> None:
    conf = {"spark.sql.shuffle.partitions": "8", "spark.hadoop.fs.defaultFS": "hdfs://nn"}
    assert fsspec_options("s3", conf) == {}
    assert fsspec_options("hdfs", {"spark.hadoop.fs.s3a.access.key": "x"}) == {}
    assert fsspec_options("s3", {"fs.s3a.endpoint": "minio:9000", "fs.s3a.connection.ssl.enabled": "false"}) == {
        "endpoint_url": "http://minio:9000"
    }


@pytest.mark.parametrize(
    ("scheme", "options", "match"),
    [
        ("s3", {"key": "k", "profile": "dev"}, r"storage options \['profile'\] for s3:// have no Spark-side"),
        ("s3", {"client_kwargs": {"verify": False}}, r"client_kwargs \['verify'\] for s3://"),
        ("s3", {"config_kwargs": {"retries": {"max_attempts": 3}}}, "config_kwargs"),
        ("s3", {"anon": True, "key": "k"}, "both anon=True and a key/secret"),
        ("gs", {"token": {"type": "service_account", "private_key": "pk"}}, "takes a service account JSON key file"),
        ("abfs", {"account_key": "k"}, r"give \['account_key'\] without account_name"),
        ("abfs", {"account_name": "a", "client_id": "c"}, r"lack \['client_secret', 'tenant_id'\]"),
        ("abfs", {"account_name": "a", "sas_token": "sv=..."}, r"\['sas_token'\] for abfs://"),
        ("abfs", {"account_name": "a", "account_key": "k", "client_id": "c"}, "both account_key and a service"),
        ("hdfs", {"webhdfs_url": "nn:9870"}, r"webhdfs_url 'nn:9870' for hdfs://; allowed: http\(s\)://"),
        ("hdfs", {"kerberos": True}, r"\['kerberos'\] for hdfs://"),
    ],
)
def test_unmappable_options_are_errors(scheme: str, options: dict[str, Any], match: str) -> None:
    with pytest.raises(StorageConfigError, match=match) as caught:
        spark_hadoop_conf(scheme, options)
    assert "pk" not in str(caught.value).replace("pk'", "")
