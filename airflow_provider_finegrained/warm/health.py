"""Is a Spark Connect server usable: a gRPC channel, then a trivial query through a Connect session."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from airflow_provider_finegrained.secrets import REDACTED
from airflow_provider_finegrained.spark.submit import connect_client_env_restored
from airflow_provider_finegrained.warm.auth import client_url
from airflow_provider_finegrained.warm.state import WarmPool, WarmPoolUnavailable

SPARK_CONNECT_PORT = 15002


def grpc_target(url: str) -> str:
    """``host:port`` of an ``sc://host:port[/;params]`` URL (15002, Spark Connect's default, if none)."""
    parts = urlsplit(url)
    if parts.scheme != "sc" or not parts.hostname:
        raise WarmPoolUnavailable(f"{url!r} is not a Spark Connect URL; allowed: e.g. sc://127.0.0.1:15002")
    return f"{parts.hostname}:{parts.port or SPARK_CONNECT_PORT}"


def check_health(url: str, timeout_s: float = 5.0, *, query: bool = True, token: str | None = None) -> None:
    """Raise WarmPoolUnavailable (naming `url` and what failed) unless the server answers a trivial query.

    The channel must be ready within `timeout_s`; then ``spark.range(1).count()`` runs in a fresh
    Connect session, which is released afterwards. ``query=False`` checks only that the server's port
    takes a connection: enough for a pool this provider started and already saw answer (its supervisor
    watches the JVM), and it keeps a warm stage's start short (no gRPC import in the task process).
    ``token``: the server's pre-shared token (a pool this provider started has one: ``WarmPool.token``);
    without it a client uses ``SPARK_CONNECT_AUTHENTICATE_TOKEN`` if that is set. Never logged.
    """
    target = grpc_target(url)
    if not query:
        check_listening(url, timeout_s)
        return
    import grpc  # type: ignore[import-untyped, unused-ignore]

    channel = grpc.insecure_channel(target)
    try:
        grpc.channel_ready_future(channel).result(timeout=timeout_s)
    except grpc.FutureTimeoutError:
        raise WarmPoolUnavailable(
            f"the Spark Connect server at {url} is unreachable: no gRPC channel to {target} within {timeout_s:g} s"
        ) from None
    finally:
        channel.close()
    with connect_client_env_restored():
        _query(url, token)


def check_listening(url: str, timeout_s: float = 5.0) -> None:
    """Raise WarmPoolUnavailable unless the server's port takes a TCP connection within ``timeout_s``."""
    parts = urlsplit(url)
    target = grpc_target(url)
    try:
        with socket.create_connection((parts.hostname or "", parts.port or SPARK_CONNECT_PORT), timeout=timeout_s):
            pass
    except OSError as exc:
        raise WarmPoolUnavailable(
            f"the Spark Connect server at {url} is unreachable: no connection to {target} within {timeout_s:g} s "
            f"({exc.strerror or exc})"
        ) from None


def check_pool(pool: WarmPool, timeout_s: float = 5.0, *, query: bool = True) -> None:
    """:func:`check_health` of ``pool`` with its token."""
    check_health(pool.url, timeout_s, query=query, token=pool.token)


def _query(url: str, token: str | None) -> None:
    from pyspark.sql import SparkSession

    try:
        # The URL with the token is the client's only; messages name the public `url`.
        spark = SparkSession.builder.remote(client_url(url, token)).create()
    except Exception as exc:
        raise WarmPoolUnavailable(
            f"the Spark Connect server at {url} refused a session: {_scrub(exc, token)}"
        ) from None
    try:
        count = spark.range(1).count()
    except Exception as exc:
        raise WarmPoolUnavailable(
            f"the Spark Connect server at {url} failed a trivial query: {_scrub(exc, token)}"
        ) from None
    finally:
        # Releases the server-side session only; the server keeps running.
        spark.stop()
    if count != 1:
        raise WarmPoolUnavailable(f"the Spark Connect server at {url} counted {count} rows in range(1)")


def _scrub(exc: BaseException, token: str | None) -> str:
    """``exc``'s message, with the token masked should a client library ever echo it."""
    text = str(exc)
    return text.replace(token, REDACTED) if token else text
