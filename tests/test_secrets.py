"""The provider's one secret rule: which keys are secrets, and how URLs, mappings and argv are masked (pure)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from airflow_provider_finegrained.secrets import (
    REDACTED,
    is_secret_key,
    redact_argv,
    redact_conf_pair,
    redact_mapping,
    redact_url,
    url_password,
    url_secrets,
)


def test_the_module_imports_nothing_of_the_provider_or_airflow() -> None:
    # Every layer (settings, submit, runtime in the driver) may import it without a cycle or a heavy import.
    code = (
        "import sys, airflow_provider_finegrained.secrets;"
        "print(sorted(m for m in sys.modules if m.startswith(('airflow', 'pyspark', 'pydantic'))"
        " and m != 'airflow_provider_finegrained' and m != 'airflow_provider_finegrained.secrets'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        # Spark's own spark.redaction.regex: secret, password, token, access[.]?key
        ("spark.authenticate.secret", True),
        ("spark.ssl.keyPassword", True),
        ("spark.hadoop.fs.s3a.session.token", True),
        ("spark.hadoop.fs.s3a.access.key", True),
        ("spark.hadoop.fs.oss.accessKey", True),
        ("spark.hadoop.fs.oss.accessKeyId", True),
        ("spark.x.access-key", True),
        ("spark.x.access_key", True),
        ("SPARK_CONNECT_AUTHENTICATE_TOKEN", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        # ... plus credentials, a last `.key` segment and Hadoop's fs.azure.account.key.<account>
        ("spark.hadoop.google.cloud.auth.service.account.json.credentials", True),
        ("spark.hadoop.fs.example.signing.KEY", True),
        ("spark.g.key", True),
        ("spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net", True),
        ("token", True),
        # not secrets: key-like words that are not a `.key` segment
        ("spark.hadoop.fs.s3a.server-side-encryption.keyring", False),
        ("spark.i.keys", False),
        ("spark.j.keyStore", False),
        ("spark.io.encryption.keySizeBits", False),
        ("spark.eventLog.dir", False),
        ("spark.sql.shuffle.partitions", False),
        ("user_id", False),
        ("", False),
    ],
)
def test_is_secret_key(key: str, secret: bool) -> None:
    assert is_secret_key(key) is secret


@pytest.mark.parametrize(
    ("url", "password", "secrets", "redacted"),
    [
        ("s3://key:secret@bucket/p", "secret", ["secret"], "s3://key:***@bucket/p"),
        ("http://user:p%40ss@host:8080/x", "p%40ss", ["p%40ss"], "http://user:***@host:8080/x"),
        ("s3://bucket/p", None, [], "s3://bucket/p"),
        ("/local/path", None, [], "/local/path"),
        ("hdfs:///warehouse/fg", None, [], "hdfs:///warehouse/fg"),
        ("http://user@host:8080", None, [], "http://user@host:8080"),
        ("sc://h:15002", None, [], "sc://h:15002"),
        # Spark Connect parameters: ;token=... is secret, the other parameters are not
        ("sc://h:15002/;token=abc123", None, ["abc123"], "sc://h:15002/;token=***"),
        (
            "sc://h:15002/;user_id=ada;token=abc123;use_ssl=true",
            None,
            ["abc123"],
            "sc://h:15002/;user_id=ada;token=***;use_ssl=true",
        ),
        ("sc://h:15002;token=abc123", None, ["abc123"], "sc://h:15002;token=***"),  # no "/": still masked
        ("sc://u:pw@h:15002/;token=t0k", "pw", ["pw", "t0k"], "sc://u:***@h:15002/;token=***"),
        # query parameters
        ("http://h:18080/api?token=abc&limit=1", None, ["abc"], "http://h:18080/api?token=***&limit=1"),
        ("http://h/x?access_key=AK&secret=SK", None, ["AK", "SK"], "http://h/x?access_key=***&secret=***"),
        ("http://[::1", None, [], "http://[::1"),  # unparseable: left as is
    ],
)
def test_url_secrets_and_redaction(url: str, password: str | None, secrets: list[str], redacted: str) -> None:
    assert url_password(url) == password
    assert url_secrets(url) == secrets
    assert redact_url(url) == redacted
    for secret in secrets:
        assert secret not in redact_url(url)


def test_redact_mapping_masks_secret_keys_only() -> None:
    conf = {"spark.authenticate.secret": "s", "spark.ui.port": "4050", "spark.hadoop.fs.s3a.access.key": "AK"}
    assert redact_mapping(conf) == {
        "spark.authenticate.secret": REDACTED,
        "spark.ui.port": "4050",
        "spark.hadoop.fs.s3a.access.key": REDACTED,
    }
    assert conf["spark.authenticate.secret"] == "s"  # a copy: the caller's mapping is untouched


@pytest.mark.parametrize(
    ("pair", "expected"),
    [
        ("spark.auth.token=abc", "spark.auth.token=***"),
        ("spark.a.password=x=y", "spark.a.password=***"),
        ("spark.ui.port=4050", "spark.ui.port=4050"),
        ("spark.secret.without.value", "spark.secret.without.value"),
    ],
)
def test_redact_conf_pair(pair: str, expected: str) -> None:
    assert redact_conf_pair(pair) == expected


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (
            ["spark-submit", "--conf", "spark.authenticate.secret=s3", "--conf", "spark.ui.port=0", "a.py"],
            ["spark-submit", "--conf", "spark.authenticate.secret=***", "--conf", "spark.ui.port=0", "a.py"],
        ),
        (
            ["spark-submit", "--conf=spark.auth.token=abc", "-c", "my.password=x", "a.py"],
            ["spark-submit", "--conf=spark.auth.token=***", "-c", "my.password=***", "a.py"],
        ),
        # only a --conf's value: an application argument that looks like a secret pair is the job's business
        (["spark-submit", "a.py", "password=visible"], ["spark-submit", "a.py", "password=visible"]),
        (["spark-submit", "--conf"], ["spark-submit", "--conf"]),
    ],
)
def test_redact_argv(argv: list[str], expected: list[str]) -> None:
    assert redact_argv(argv) == expected


def test_submit_log_redaction_uses_the_same_rule() -> None:
    # spark.submit keeps its own names until it imports these; what it masks must not differ meanwhile.
    from airflow_provider_finegrained.spark import submit

    keys = ["spark.a.password", "spark.c.token", "spark.e.access.key", "spark.h.key.acct", "spark.i.keys", "x"]
    assert [submit.is_secret_key(k) for k in keys] == [is_secret_key(k) for k in keys]
    argv = ["spark-submit", "--conf", "spark.a.token=t", "-c", "spark.ui.port=1", "--conf=spark.b.secret=s", "a.py"]
    assert submit.redacted_command(argv) == redact_argv(argv)
