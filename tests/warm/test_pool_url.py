"""A started pool's URL is ``sc://localhost:PORT``: the only host for which pyspark's Connect client sends a
token in plaintext (any other host gets TLS, which the pool's plaintext server never answers). ``localhost``
must reach the server on 127.0.0.1, and the port is held on ``::1`` too, so that no other process can listen
there and be sent the token. No Spark: gRPC servers of Python stand in for the pool (and for a squatter).
"""

from __future__ import annotations

import errno
import socket
import time
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc  # type: ignore[import-untyped, unused-ignore]
import pytest

from airflow_provider_finegrained.warm import loopback
from airflow_provider_finegrained.warm.auth import client_url
from airflow_provider_finegrained.warm.loopback import hold_localhost, localhost_addresses, pool_url
from airflow_provider_finegrained.warm.server import HOST
from airflow_provider_finegrained.warm.state import WarmPoolUnavailable

pytestmark = pytest.mark.security

TOKEN = "the-pools-token"
METHOD = "/finegrained.Test/Who"


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


def serve(address: str, label: str, seen: list[str]) -> grpc.Server:
    """A plaintext gRPC server (as the pool's is) answering ``label`` and recording the token it was sent."""

    def who(request: bytes, context: Any) -> bytes:
        seen.append(dict(context.invocation_metadata()).get("authorization", "-"))
        return label.encode()

    handler = grpc.method_handlers_generic_handler(
        "finegrained.Test", {"Who": grpc.unary_unary_rpc_method_handler(who)}
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers([handler])
    if server.add_insecure_port(address) == 0:
        raise OSError(errno.EADDRINUSE, f"cannot bind {address}")
    server.start()
    return server


def ask(url: str, timeout_s: float = 5.0) -> str:
    """Call the server the way pyspark's Connect client reaches ``url`` (its own channel builder)."""
    from pyspark.sql.connect.client import DefaultChannelBuilder

    channel = DefaultChannelBuilder(url).toChannel()
    try:
        return bytes(channel.unary_unary(METHOD)(b"", timeout=timeout_s)).decode()
    finally:
        channel.close()


@pytest.fixture
def fake_pool() -> Iterator[tuple[int, list[str]]]:
    """A plaintext server on the pool's address (127.0.0.1) and the tokens it was sent."""
    seen: list[str] = []
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        port = int(probe.getsockname()[1])
    server = serve(f"{HOST}:{port}", "pool", seen)
    try:
        yield port, seen
    finally:
        server.stop(None)


def test_a_started_pools_url_is_localhost_which_reaches_the_servers_address() -> None:
    assert pool_url(4242) == "sc://localhost:4242"
    addresses = localhost_addresses()
    assert HOST in addresses, addresses


def test_the_printed_url_plus_the_token_reaches_the_pool_and_the_127_form_does_not(
    fake_pool: tuple[int, list[str]],
) -> None:
    port, seen = fake_pool
    assert ask(f"{pool_url(port)}/;token={TOKEN}") == "pool"
    assert seen == [f"Bearer {TOKEN}"]
    # What `warm start` used to print: with a token, pyspark speaks TLS to it and the plaintext server never
    # answers (pyspark's own client retries such failures for minutes; here one call is bounded).
    began = time.monotonic()
    with pytest.raises(grpc.RpcError) as failed:
        ask(f"sc://127.0.0.1:{port}/;token={TOKEN}", timeout_s=3)
    assert failed.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    assert time.monotonic() - began < 10
    assert seen == [f"Bearer {TOKEN}"]  # nothing more reached the pool
    # The provider's own clients build their URL with client_url, which says localhost for a loopback pool.
    assert client_url(f"sc://127.0.0.1:{port}", TOKEN) == f"sc://localhost:{port}/;token={TOKEN}"


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback here: nothing can listen on ::1")
def test_a_squatter_on_ipv6_loopback_gets_the_token_of_a_pool_that_does_not_hold_its_port_there(
    fake_pool: tuple[int, list[str]],
) -> None:
    """The hazard the guard closes."""
    port, seen = fake_pool
    # gRPC resolves localhost to ::1 as well (even when /etc/hosts does not say so) and tries it first.
    stolen: list[str] = []
    squatter = serve(f"[::1]:{port}", "squatter", stolen)
    try:
        assert ask(f"{pool_url(port)}/;token={TOKEN}") == "squatter"
        assert stolen == [f"Bearer {TOKEN}"] and seen == []
    finally:
        squatter.stop(None)


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback here: nothing can listen on ::1")
def test_no_squatter_can_take_ipv6_loopback_while_the_pool_holds_its_port_there(
    fake_pool: tuple[int, list[str]],
) -> None:
    # A port of its own, where nothing listened before: a squatter's closed connection there would keep the
    # port in TIME_WAIT for a minute, and the guards bind without SO_REUSEADDR (on purpose).
    port, seen = fake_pool
    guards = hold_localhost(port)
    assert guards is not None and any(g.family == socket.AF_INET6 for g in guards)
    stolen: list[str] = []
    try:
        with pytest.raises((RuntimeError, OSError), match="bind"):  # grpc: "Failed to bind to address [::1]:..."
            serve(f"[::1]:{port}", "squatter", stolen)
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as other, pytest.raises(OSError) as taken:
            other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            other.bind(("::1", port))
        assert taken.value.errno == errno.EADDRINUSE
        assert ask(f"{pool_url(port)}/;token={TOKEN}") == "pool"  # refused on ::1 at once, answered on 127.0.0.1
        assert stolen == [] and seen == [f"Bearer {TOKEN}"]
    finally:
        for guard in guards:
            guard.close()


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback here")
def test_a_port_taken_on_ipv6_loopback_is_not_the_pools(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as squatter:
        squatter.bind(("::1", 0))
        squatter.listen()
        taken = int(squatter.getsockname()[1])
        assert hold_localhost(taken) is None
        ports = iter([taken])
        monkeypatch.setattr(loopback, "free_port", lambda: next(ports, 0) or _free_port())
        port, guards = loopback.pool_port()
        try:
            assert port != taken and guards
        finally:
            for guard in guards:
                guard.close()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("addresses", "shown"),
    [
        (["10.9.9.9"], "'localhost' resolves to 10.9.9.9 on this host"),
        (["::1"], "'localhost' resolves to ::1 on this host"),
        (["127.0.0.1", "192.168.1.5"], "resolves to 127.0.0.1, 192.168.1.5"),
    ],
)
def test_a_localhost_that_does_not_reach_the_server_is_refused_clearly(
    monkeypatch: pytest.MonkeyPatch, addresses: list[str], shown: str
) -> None:
    def resolve(host: str, port: Any, *args: Any, **kwargs: Any) -> list[Any]:
        assert host == "localhost"
        family = socket.AF_INET6 if ":" in addresses[0] else socket.AF_INET
        return [(family, socket.SOCK_STREAM, 6, "", (a, 0)) for a in addresses]

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    with pytest.raises(WarmPoolUnavailable, match=shown) as refused:
        hold_localhost(4242)
    assert "listens on 127.0.0.1" in str(refused.value) and "warm_pool 'off'" in str(refused.value)
