"""The provider's one secret rule: which keys are secrets, and how URLs, mappings and argv are masked (pure)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from airflow_provider_finegrained.secrets import (
    AIRFLOW_DEFAULT_SENSITIVE_FIELDS,
    REDACTED,
    SECRET_KEY_PATTERN,
    SENSITIVE_NAMES_ENV,
    is_secret_key,
    normalized_key,
    redact_argv,
    redact_conf_pair,
    redact_mapping,
    redact_url,
    sensitive_names,
    spark_redaction_regex,
    url_password,
    url_secrets,
)

pytestmark = pytest.mark.security

# The trial (#34): Airflow masks these in the task log; the provider must keep them everywhere else.
AIRFLOW_NAMED_SECRETS = {
    "spark.executorEnv.API_KEY": "APIKEY-555qrs",
    "spark.executorEnv.DB_PASSWD": "passwd-777xyz",
    "spark.hadoop.my.private_key": "pk-999abc",
    "spark.executorEnv.GPG_PASSPHRASE": "phrase-31337",
    "spark.hadoop.http.authorization": "Basic-dXNlcjpwdw",
    "spark.executorEnv.APIKEY": "apikey-2468",
}


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
        # Airflow's default sensitive names, as a substring of the normalized key (should_hide_value_for_key)
        ("spark.executorEnv.API_KEY", True),
        ("spark.executorEnv.APIKEY", True),
        ("spark.executorEnv.api-key", True),
        ("spark.executorEnv.DB_PASSWD", True),
        ("spark.hadoop.my.private_key", True),
        ("spark.hadoop.my.private.key", True),
        ("spark.executorEnv.GPG_PASSPHRASE", True),
        ("spark.hadoop.http.authorization", True),
        ("spark.hadoop.fs.s3a.proxy.password", True),
        ("spark.executorEnv.DATABASE_DSN", True),
        ("spark.hadoop.google.cloud.auth.service.account.json.keyfile", True),
        ("SLACK_WEBHOOK_URL", True),
        ("  spark.executorEnv.Auth_Header  ", True),
        # not secrets: key-like words that are not a `.key` segment
        ("spark.hadoop.fs.s3a.server-side-encryption.keyring", False),
        ("spark.i.keys", False),
        ("spark.j.keyStore", False),
        ("spark.io.encryption.keySizeBits", False),
        ("spark.eventLog.dir", False),
        ("spark.sql.shuffle.partitions", False),
        ("user_id", False),
        ("spark.executorEnv.API_VERSION", False),
        ("spark.executorEnv.PASS", False),
        ("spark.kubernetes.authenticate.driver.serviceAccountName", False),  # no "_" between the words
        ("spark.redaction.regex", False),
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


def _airflow_defaults() -> frozenset[str]:
    from airflow.sdk._shared.secrets_masker import DEFAULT_SENSITIVE_FIELDS

    return frozenset(DEFAULT_SENSITIVE_FIELDS)


def test_the_copy_of_airflows_default_names_is_airflows() -> None:
    # The Spark driver (no Airflow loaded) uses the copy: when an Airflow release changes its list, this fails.
    assert _airflow_defaults() == AIRFLOW_DEFAULT_SENSITIVE_FIELDS
    import airflow._shared.secrets_masker as core

    assert frozenset(core.DEFAULT_SENSITIVE_FIELDS) == AIRFLOW_DEFAULT_SENSITIVE_FIELDS


@pytest.mark.parametrize(
    "key",
    ["spark.executorEnv.API_KEY", "spark.x.Passwd", "a.b-c.PRIVATE_KEY", "x.auth header", "spark.ui.port", "DSN"],
)
def test_airflow_names_match_as_airflows_should_hide_value_for_key(key: str) -> None:
    from airflow.sdk._shared.secrets_masker import SecretsMasker

    masker: Any = SecretsMasker()  # type: ignore[no-untyped-call]
    masker.sensitive_variables_fields = list(_airflow_defaults())
    masker.hide_sensitive_var_conn_fields = True
    assert masker.should_hide_value_for_key(key) == any(n in normalized_key(key) for n in sensitive_names())
    if masker.should_hide_value_for_key(key):
        assert is_secret_key(key)  # the provider hides at least what Airflow hides


def test_configured_sensitive_names_are_secret_too(monkeypatch: pytest.MonkeyPatch) -> None:
    # [core] sensitive_var_conn_names through Airflow's configuration (this process has Airflow loaded).
    key = "spark.executorEnv.MYCORP_PIN"
    assert not is_secret_key(key)
    monkeypatch.setenv(SENSITIVE_NAMES_ENV, " MyCorp_Pin , ,other.name")
    assert is_secret_key(key) and is_secret_key("spark.x.other_name")
    assert redact_mapping({key: "4711"}) == {key: REDACTED}
    assert "mycorp[\\W_]+pin" in spark_redaction_regex()
    assert not is_secret_key("spark.ui.port")  # the empty name between the commas hides nothing


def _run_python(code: str, env: dict[str, str]) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_without_airflow_loaded_the_copy_and_the_environment_decide() -> None:
    # As in a Spark driver: deciding loads no Airflow; the environment variable still adds names.
    code = (
        "import sys; from airflow_provider_finegrained.secrets import is_secret_key;"
        "print(is_secret_key('spark.executorEnv.API_KEY'), is_secret_key('spark.x.MYCORP_PIN'),"
        " any(m == 'airflow' or m.startswith('airflow.') for m in sys.modules))"
    )
    base = {k: v for k, v in os.environ.items() if k != SENSITIVE_NAMES_ENV}
    assert _run_python(code, base) == "True False False"
    assert _run_python(code, {**base, SENSITIVE_NAMES_ENV: "mycorp_pin"}) == "True True False"


def test_with_airflow_loaded_its_configuration_file_adds_names(tmp_path: Path) -> None:
    (tmp_path / "airflow.cfg").write_text("[core]\nsensitive_var_conn_names = mycorp_pin\n")
    env = {k: v for k, v in os.environ.items() if k != SENSITIVE_NAMES_ENV and not k.startswith("AIRFLOW__")}
    env["AIRFLOW_HOME"] = str(tmp_path)
    code = (
        "import airflow.sdk; from airflow_provider_finegrained.secrets import is_secret_key;"
        "print(is_secret_key('spark.x.MYCORP_PIN'))"
    )
    assert _run_python(code, env).splitlines()[-1] == "True"


def test_the_pattern_interface_applies_the_whole_rule() -> None:
    # hooks/coercion.py searches a whole unparsable text for a secret name with it.
    assert SECRET_KEY_PATTERN.search('{"spark.executorEnv.API_KEY": "v"') is not None
    assert SECRET_KEY_PATTERN.search("spark.a.password") is not None
    assert SECRET_KEY_PATTERN.search('{"spark.ui.port": 4040') is None


def test_the_trace_mapping_masks_airflows_names() -> None:
    conf = {**AIRFLOW_NAMED_SECRETS, "spark.ui.port": "4050"}
    redacted = redact_mapping(conf)
    assert redacted == {**dict.fromkeys(AIRFLOW_NAMED_SECRETS, REDACTED), "spark.ui.port": "4050"}
    assert not any(value in str(redacted) for value in AIRFLOW_NAMED_SECRETS.values())


@pytest.mark.parametrize(
    ("key", "secret"),
    [
        *((k, True) for k in AIRFLOW_NAMED_SECRETS),
        ("spark.authenticate.secret", True),
        ("spark.hadoop.fs.s3a.access.key", True),
        ("spark.hadoop.fs.azure.account.key.acct.dfs.core.windows.net", True),
        ("spark.hadoop.fs.example.signing.KEY", True),
        ("spark.ui.port", False),
        ("spark.executor.memory", False),
        ("spark.i.keys", False),
    ],
)
def test_the_spark_redaction_regex_matches_what_the_rule_calls_secret(key: str, secret: bool) -> None:
    # Spark finds the regex in each key (java.util.regex; these constructs read the same in Python's re).
    assert (re.search(spark_redaction_regex(), key) is not None) is secret
    assert is_secret_key(key) is secret
