"""Which values are secrets, and how they are masked: the one definition the provider uses.

Dependency-free (standard library only), so the settings, the submit builder, the operator and the
driver-side runtime can all share it without import cycles.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final, TypeVar
from urllib.parse import urlsplit, urlunsplit

# Spark's own spark.redaction.regex ((?i)secret|password|token|access[.]?key) plus credentials, `....key`
# and Hadoop's `fs.azure.account.key.<account>`.
SECRET_KEY_PATTERN: Final = re.compile(r"password|secret|token|credential|access[._-]?key|\.key(?:$|\.)", re.IGNORECASE)
REDACTED: Final = "***"
CONF_FLAGS: Final = ("--conf", "-c")
"""spark-submit's flags whose next argument is a ``key=value`` Spark property."""

_V = TypeVar("_V")


def is_secret_key(key: str) -> bool:
    """Whether a Spark property, environment variable or URL parameter named ``key`` holds a secret."""
    return SECRET_KEY_PATTERN.search(key) is not None


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
