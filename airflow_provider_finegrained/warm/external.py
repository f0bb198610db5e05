"""An external Spark Connect server named by an Airflow connection (``warm_pool = conn:<conn_id>``)."""

from __future__ import annotations

from urllib.parse import quote

from airflow_provider_finegrained.warm.state import WarmPoolUnavailable

CONN_PREFIX = "conn:"
"""``warm_pool = conn:<conn_id>``: an external Spark Connect server named by an Airflow connection."""


def external_from_connection(conn_id: str) -> tuple[str, str | None]:
    """``(sc://host:port, token)`` of an Airflow connection naming a Spark Connect server.

    Host (``sc://`` optional) and port (default 15002) name the server; the password is the token; the
    login, if any, is the Connect user id; extra ``use_ssl`` is passed on.
    """
    from airflow.sdk import BaseHook

    from airflow_provider_finegrained.warm.health import SPARK_CONNECT_PORT

    try:
        conn = BaseHook.get_connection(conn_id)
    except Exception as exc:
        raise WarmPoolUnavailable(f"warm_pool: connection {conn_id!r} cannot be read: {exc}") from None
    host = (conn.host or "").strip().removeprefix("sc://").strip("/")
    if not host or "/" in host or ";" in host or ":" in host:
        raise WarmPoolUnavailable(
            f"warm_pool: connection {conn_id!r} has host {conn.host!r}; allowed: a host name or address "
            "(sc:// optional, the port in the port field), e.g. spark-connect.example.com"
        )
    params = []
    if conn.login:
        params.append(f"user_id={quote(conn.login, safe='')}")
    if str(conn.extra_dejson.get("use_ssl", "")).lower() in ("true", "1"):
        params.append("use_ssl=true")
    url = f"sc://{host}:{conn.port or SPARK_CONNECT_PORT}" + ("/;" + ";".join(params) if params else "")
    return url, conn.password or None
