"""A warm pool's lock: Spark Connect's pre-shared token, kept in a file only its owner can read.

The server takes the token from ``SPARK_CONNECT_AUTHENTICATE_TOKEN`` in its environment (Spark's
``spark.connect.authenticate.token`` falls back to it), so it is never on a command line; clients get it
in the ``;token=`` parameter of the URL they connect with (:func:`client_url`), which is never logged:
what is shown is the pool's public ``sc://host:port``.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from urllib.parse import quote, unquote, urlsplit, urlunsplit

TOKEN_FILE = "token"
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
"""Where Spark Connect's server (and pyspark's client) read the pre-shared token."""
TOKEN_PARAM = "token"
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")


def new_token() -> str:
    """A fresh token for a pool (256 random bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def write_token(folder: str, token: str) -> str:
    """Store ``token`` in ``folder/token``, created 0600 (never readable by others, not even briefly)."""
    path = os.path.join(folder, TOKEN_FILE)
    temporary = os.path.join(folder, f".{TOKEN_FILE}.{os.getpid()}.tmp")
    with contextlib.suppress(FileNotFoundError):
        os.remove(temporary)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(token)
    os.replace(temporary, path)  # readers see the old token or the new one, never half of one
    return path


def read_token(folder: str) -> str | None:
    """The token of the pool in ``folder``; None if it has none (a pool started before pools were locked)."""
    try:
        with open(os.path.join(folder, TOKEN_FILE), encoding="utf-8") as handle:
            return handle.read().strip() or None
    except FileNotFoundError:
        return None


def remove_token(folder: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.remove(os.path.join(folder, TOKEN_FILE))


def _params(path: str) -> list[tuple[str, str]]:
    pairs = []
    for part in path.lstrip("/").split(";"):
        key, sep, value = part.partition("=")
        if sep:
            pairs.append((key, value))
    return pairs


def split_token(url: str) -> tuple[str, str | None]:
    """``(url without its ;token=..., the token)`` of an ``sc://`` URL (other parameters are kept)."""
    parts = urlsplit(url)
    params = _params(parts.path)
    token = next((value for key, value in params if key == TOKEN_PARAM), None)
    if token is None:
        return url, None
    kept = ";".join(f"{key}={value}" for key, value in params if key != TOKEN_PARAM)
    return urlunsplit(parts._replace(path=f"/;{kept}" if kept else "")), unquote(token)


def client_url(url: str, token: str | None, *, session_id: str | None = None, user_id: str | None = None) -> str:
    """The URL a client connects with: ``url`` plus ``;token=`` (and ``;session_id=``, ``;user_id=``).

    A secret when there is a token: never log it. ``session_id`` (with the ``user_id`` it was opened
    under) attaches to an existing session of the server, e.g. another client's.

    With a token, pyspark speaks TLS to any host but ``localhost`` (for which it uses gRPC's local
    credentials), so a loopback address is written as ``localhost``: the pool listens on 127.0.0.1.
    """
    parts = urlsplit(url)
    replaced = {TOKEN_PARAM, "session_id"} | ({"user_id"} if user_id is not None else set())
    params = [(key, value) for key, value in _params(parts.path) if key not in replaced]
    netloc = parts.netloc
    if token is not None:
        params.append((TOKEN_PARAM, quote(token, safe="")))  # pyspark unquotes parameter values
        if parts.hostname in LOOPBACK_HOSTS:
            netloc = f"localhost:{parts.port}" if parts.port else "localhost"
    if session_id is not None:
        params.append(("session_id", session_id))
    if user_id is not None:
        params.append(("user_id", quote(user_id, safe="")))
    path = "/;" + ";".join(f"{key}={value}" for key, value in params) if params else ""
    return urlunsplit(parts._replace(netloc=netloc, path=path))
