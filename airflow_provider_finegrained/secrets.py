"""Which values are secrets, and how they are masked: the one definition the provider uses.

The rule is Airflow's plus Spark's. A key (a Spark property, an environment variable, a URL parameter) is
secret when

* it contains one of Airflow's sensitive names (its ``DEFAULT_SENSITIVE_FIELDS`` and ``[core]
  sensitive_var_conn_names``), compared as Airflow's ``should_hide_value_for_key`` does: the key stripped,
  lower-cased, every run of non-word characters made one ``_`` (``spark.executorEnv.API_KEY`` holds
  ``api_key``); or
* it matches :data:`SPARK_SECRET_KEY_PATTERN`: Spark's default ``spark.redaction.regex`` plus
  ``credential``, a last or inner ``.key`` segment and Hadoop's ``fs.azure.account.key.<account>``.

Importable without Airflow (the Spark driver imports it): Airflow's names are read from Airflow only in a
process that has already imported it; elsewhere :data:`AIRFLOW_DEFAULT_SENSITIVE_FIELDS` and the
``AIRFLOW__CORE__SENSITIVE_VAR_CONN_NAMES`` environment variable stand in. Airflow's
``[core] hide_sensitive_var_conn_fields = False`` turns off its log masking only: the provider still keeps
secrets off command lines, traces and UIs.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Mapping, Sequence
from typing import Final, TypeVar
from urllib.parse import urlsplit, urlunsplit

# Spark's own spark.redaction.regex ((?i)secret|password|token|access[.]?key) plus credentials, `....key`
# and Hadoop's `fs.azure.account.key.<account>`.
SPARK_SECRET_KEY_PATTERN: Final = re.compile(
    r"password|secret|token|credential|access[._-]?key|\.key(?:$|\.)", re.IGNORECASE
)
# A copy of Airflow 3.3's DEFAULT_SENSITIVE_FIELDS (airflow.sdk._shared.secrets_masker) for processes without
# Airflow; tests/security/test_secrets.py fails when Airflow's set drifts from it.
AIRFLOW_DEFAULT_SENSITIVE_FIELDS: Final = frozenset(
    {
        "access_key",
        "access_token",
        "api_key",
        "apikey",
        "auth_header",
        "authorization",
        "bearer",
        "connection_string",
        "dsn",
        "keyfile_dict",
        "passphrase",
        "passwd",
        "password",
        "private_key",
        "proxies",
        "proxy",
        "proxy_password",
        "secret",
        "service_account",
        "service_key",
        "token",
        "webhook_url",
    }
)
SENSITIVE_NAMES_ENV: Final = "AIRFLOW__CORE__SENSITIVE_VAR_CONN_NAMES"
"""Where ``[core] sensitive_var_conn_names`` is read from in a process that has not imported Airflow."""
REDACTION_REGEX_CONF: Final = "spark.redaction.regex"
REDACTED: Final = "***"
CONF_FLAGS: Final = ("--conf", "-c")
"""spark-submit's flags whose next argument is a ``key=value`` Spark property."""

_V = TypeVar("_V")
_NON_WORD = re.compile(r"\W+")


def normalized_key(key: str) -> str:
    """``key`` as Airflow's ``should_hide_value_for_key`` compares it: stripped, lower case, ``\\W+`` -> ``_``."""
    return _NON_WORD.sub("_", key.strip().lower())


def _airflow_settings() -> tuple[frozenset[str], str]:
    """Airflow's default sensitive names and its ``[core] sensitive_var_conn_names`` text."""
    if "airflow" in sys.modules:
        # Only where Airflow is loaded already: importing it costs seconds and may write $AIRFLOW_HOME,
        # which a Spark driver on a cluster node must not pay for a log line.
        try:
            from airflow.sdk._shared.secrets_masker import DEFAULT_SENSITIVE_FIELDS
            from airflow.sdk.configuration import conf

            return frozenset(DEFAULT_SENSITIVE_FIELDS), conf.get("core", "sensitive_var_conn_names", fallback="") or ""
        except Exception:  # an Airflow without the task SDK, or a broken configuration: the copy below
            pass
    return AIRFLOW_DEFAULT_SENSITIVE_FIELDS, os.environ.get(SENSITIVE_NAMES_ENV, "")


@functools.lru_cache(maxsize=16)
def _names(defaults: frozenset[str], configured: str) -> tuple[str, ...]:
    # Airflow compares the configured names as written (stripped); normalized here too, so a name written in
    # capitals or with a dot still matches (Airflow never would: its keys are lower-cased); empty ones dropped,
    # where Airflow would hide every value.
    names = {normalized_key(name) for name in (*defaults, *configured.split(","))}
    return tuple(sorted(name for name in names if name))


def sensitive_names() -> tuple[str, ...]:
    """Airflow's sensitive names in effect here: its defaults plus ``[core] sensitive_var_conn_names``."""
    return _names(*_airflow_settings())


@functools.lru_cache(maxsize=16)
def _names_pattern(names: tuple[str, ...]) -> re.Pattern[str]:
    return re.compile("|".join(re.escape(name) for name in names) or r"(?!)")


class SecretKeyRule:
    """The rule with ``re.Pattern``'s ``search``, for callers that look for a secret name in a key or a text."""

    def search(self, text: str) -> re.Match[str] | None:
        """A match of a secret name in ``text`` (for an Airflow name, in its normalized form), or None."""
        return SPARK_SECRET_KEY_PATTERN.search(text) or _names_pattern(sensitive_names()).search(normalized_key(text))

    def __repr__(self) -> str:
        return f"SecretKeyRule({SPARK_SECRET_KEY_PATTERN.pattern!r} + Airflow's sensitive names)"


SECRET_KEY_PATTERN: Final = SecretKeyRule()
"""The whole rule (Airflow's names and Spark's pattern); :func:`is_secret_key` for a key."""


def is_secret_key(key: str) -> bool:
    """Whether a Spark property, environment variable or URL parameter named ``key`` holds a secret."""
    return SECRET_KEY_PATTERN.search(key) is not None


def spark_redaction_regex() -> str:
    """The rule as a Java regex for ``spark.redaction.regex`` (Spark's UI, event log and logs).

    Spark finds it in a property's key or value. An Airflow name's ``_`` stands for any run of ``_`` and
    non-word characters, so the regex matches every key the rule calls secret (and a few more: harmless, it
    only masks what Spark shows).
    """
    names = [re.escape(name).replace("_", r"[\W_]+") for name in sensitive_names()]
    return "(?i)" + "|".join([SPARK_SECRET_KEY_PATTERN.pattern, *names])


def url_password(url: str) -> str | None:
    """The password of a URL's user info (``s3://key:secret@bucket``), or None."""
    try:
        return urlsplit(url).password or None
    except ValueError:
        return None


def _secret_params(text: str, separator: str) -> list[tuple[str, str]]:
    """``(key, value)`` of the secret ``key=value`` parameters in ``text`` split on ``separator``."""
    found = []
    for part in text.split(separator):
        key, sep, value = part.partition("=")
        if sep and value and is_secret_key(key):
            found.append((key, value))
    return found


def url_secrets(url: str) -> list[str]:
    """Every secret a URL carries: its user-info password, and the values of secret parameters.

    Parameters are the query's (``?token=...&x=1``) and Spark Connect's (``sc://host:15002/;token=...``).
    Values are returned as written in the URL (percent-encoding kept), as they appear in logs.
    """
    try:
        parts = urlsplit(url)
    except ValueError:
        return []
    found = [password] if (password := url_password(url)) else []
    # Spark Connect puts ;key=value after the path's "/"; a URL missing that "/" has them in the netloc.
    found.extend(value for _, value in _secret_params(parts.netloc, ";"))
    found.extend(value for _, value in _secret_params(parts.path, ";"))
    found.extend(value for _, value in _secret_params(parts.query, "&"))
    return found


def _redact_params(text: str, separator: str) -> str:
    parts = []
    for part in text.split(separator):
        key, sep, value = part.partition("=")
        parts.append(f"{key}={REDACTED}" if sep and value and is_secret_key(key) else part)
    return separator.join(parts)


def redact_url(url: str) -> str:
    """``url`` with every secret from :func:`url_secrets` replaced by ``***``; other text unchanged."""
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:
        return url
    netloc = parts.netloc.replace(f":{password}@", f":{REDACTED}@", 1) if password else parts.netloc
    netloc = _redact_params(netloc, ";")
    redacted = parts._replace(
        netloc=netloc, path=_redact_params(parts.path, ";"), query=_redact_params(parts.query, "&")
    )
    return url if redacted == parts else urlunsplit(redacted)


def redact_mapping(values: Mapping[str, _V]) -> dict[str, _V | str]:
    """A copy of ``values`` (Spark properties, environment) with secret keys' values replaced by ``***``."""
    return {key: REDACTED if is_secret_key(key) else value for key, value in values.items()}


def redact_conf_pair(pair: str) -> str:
    """``key=***`` for a secret ``key=value`` Spark property; anything else unchanged."""
    key, sep, _ = pair.partition("=")
    return f"{key}={REDACTED}" if sep and is_secret_key(key) else pair


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A copy of a spark-submit argument list with secret ``--conf k=v`` / ``-c k=v`` / ``--conf=k=v`` values masked."""
    redacted: list[str] = []
    after_conf = False
    for arg in argv:
        if after_conf:
            redacted.append(redact_conf_pair(arg))
            after_conf = False
        elif arg in CONF_FLAGS:
            redacted.append(arg)
            after_conf = True
        elif arg.startswith("--conf="):
            redacted.append("--conf=" + redact_conf_pair(arg.removeprefix("--conf=")))
        else:
            redacted.append(arg)
    return redacted
