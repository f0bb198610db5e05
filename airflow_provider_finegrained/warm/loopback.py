"""A started pool's address: ``localhost``, a port free on every loopback address it may resolve to, held there."""

from __future__ import annotations

import errno
import ipaddress
import socket

from airflow_provider_finegrained.warm.server import HOST, free_port
from airflow_provider_finegrained.warm.state import WarmPoolUnavailable

POOL_HOST = "localhost"
"""The host of a started pool's URL. With a token, pyspark's Connect client speaks plaintext to ``localhost``
only (gRPC's local credentials) and TLS to any other host, which the pool's plaintext server never answers;
``localhost`` must therefore reach the server, which listens on ``HOST`` (127.0.0.1)."""
PORT_ATTEMPTS = 20


def localhost_addresses() -> list[str]:
    """The addresses ``localhost`` resolves to here; WarmPoolUnavailable unless they are loopback ones and
    include the server's 127.0.0.1 (otherwise a client with the token could not reach the pool)."""
    try:
        infos = socket.getaddrinfo(POOL_HOST, None, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise WarmPoolUnavailable(
            f"{POOL_HOST!r} does not resolve on this host ({exc}); a warm pool needs it"
        ) from None
    addresses = list(dict.fromkeys(str(info[4][0]).partition("%")[0] for info in infos))
    if HOST not in addresses or not all(ipaddress.ip_address(a).is_loopback for a in addresses):
        raise WarmPoolUnavailable(
            f"{POOL_HOST!r} resolves to {', '.join(addresses)} on this host; the warm pool listens on {HOST}, and "
            f"a Spark Connect client with a token reaches it in plaintext only as {POOL_HOST!r}: map "
            f"{POOL_HOST} to {HOST} (/etc/hosts) or set warm_pool 'off'"
        )
    return addresses


def hold_localhost(port: int) -> list[socket.socket] | None:
    """Bind ``port`` on every other loopback address ``localhost`` may resolve to (``::1`` always: gRPC's
    resolver adds it for ``localhost`` even when /etc/hosts does not), without listening; None if one is taken.

    A client tries those addresses before or after 127.0.0.1 and sends the token to whatever listens there:
    held by the pool's supervisor for the pool's life, they refuse connections (the client moves on to
    127.0.0.1) and nobody else can bind them (no SO_REUSEADDR/SO_REUSEPORT on these sockets).
    """
    guards: list[socket.socket] = []
    for address in dict.fromkeys([*localhost_addresses(), "::1"]):
        if address == HOST:
            continue
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue  # no IPv6 here: nobody can listen on ::1 either
        try:
            sock.bind((address, port))
        except OSError as exc:
            sock.close()
            if exc.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                continue  # not an address of this host: nothing can listen on it
            for held in guards:
                held.close()
            if exc.errno == errno.EADDRINUSE:
                return None
            raise
        guards.append(sock)
    return guards


def pool_port() -> tuple[int, list[socket.socket]]:
    """A free port for the server, and the guards of its other loopback addresses (:func:`hold_localhost`)."""
    for _ in range(PORT_ATTEMPTS):
        port = free_port()
        guards = hold_localhost(port)
        if guards is not None:
            return port, guards
    raise WarmPoolUnavailable(f"no port free on every loopback address of {POOL_HOST!r} after {PORT_ATTEMPTS} tries")


def pool_url(port: int) -> str:
    """The URL of a started pool: public (no token; a client adds ``;token=``, see ``warm.auth.client_url``)."""
    return f"sc://{POOL_HOST}:{port}"
