"""A warm pool's lifecycle: start one (once per folder, however many ask), find it, lease it, stop it."""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import psutil  # type: ignore[import-untyped, unused-ignore]

from airflow_provider_finegrained.spark.java import check_java
from airflow_provider_finegrained.spark.process_tree import ProcessTreeSurvivedError, terminate_processes, wait_gone
from airflow_provider_finegrained.storage.locations import plain_name
from airflow_provider_finegrained.warm.auth import new_token, remove_token, split_token, write_token
from airflow_provider_finegrained.warm.health import check_health
from airflow_provider_finegrained.warm.server import (
    HOST,
    PoolShape,
    free_port,
    pool_shape,
    server_command,
    server_env,
    server_master,
    server_secret_conf,
    storage_identity,
    storage_spark_conf,
)
from airflow_provider_finegrained.warm.state import (
    SERVER_LOG,
    SUPERVISOR_LOG,
    SUPERVISOR_MODULE,
    Lease,
    WarmPool,
    WarmPoolUnavailable,
    hold_lease,
    is_supervisor,
    last_used,
    live_leases,
    pool_from_state,
    pool_processes,
    read_state,
    remove_leases,
    remove_state,
    start_lock,
    touch_last_used,
)

log = logging.getLogger(__name__)

WARM_FOLDER = "_warm"
CONN_PREFIX = "conn:"
"""``warm_pool = conn:<conn_id>``: an external Spark Connect server named by an Airflow connection."""
DEFAULT_START_TIMEOUT_S = 300.0
DEFAULT_HEALTH_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 60.0
POOL_HOST = "localhost"
"""The host of a started pool's URL. With a token, pyspark's Connect client speaks plaintext to ``localhost``
only (gRPC's local credentials) and TLS to any other host, which the pool's plaintext server never answers;
``localhost`` must therefore reach the server, which listens on ``HOST`` (127.0.0.1)."""
PORT_ATTEMPTS = 20
# Supervisors this process started: polled so that they do not linger as zombies once they exit.
_children: list[subprocess.Popen[bytes]] = []


class WarmPoolStopError(RuntimeError):
    """Processes of the pool survived SIGKILL."""


def auto_folder(settings: Any) -> str:
    """``<storage_root>/_warm/<host>/<master>``: every task on this host finds the same pool there.

    A pool is one per Airflow worker host: it listens on the host's loopback only, and its folder holds
    pids, locks and a Unix socket that mean nothing on another host. ``<host>`` keeps the hosts of a
    local root that several of them mount (NFS) apart. A remote storage_root (hdfs://, s3://...) cannot
    hold them at all: the folder is then ``$TMPDIR/finegrained-<uid>/_warm/<master>``, on the host's own
    disk. Its data stays on the root.
    """
    if settings.storage_is_local:
        root = os.path.join(
            settings.storage_root.removeprefix("file://"), WARM_FOLDER, plain_name(socket.gethostname())
        )
    else:
        root = os.path.join(tempfile.gettempdir(), f"finegrained-{os.getuid()}", WARM_FOLDER)
    return os.path.abspath(os.path.join(root, plain_name(settings.master)))


def pool_folders(warm_root: str | os.PathLike[str]) -> list[str]:
    """The folders pools may live in under a local ``<root>/_warm``: ``<host>/<master>`` (:func:`auto_folder`), and
    ``<master>``, where a provider before per-host folders put them. Sorted; empty when there is no such folder."""
    root = Path(warm_root)
    return sorted(str(p) for p in [*root.glob("*"), *root.glob("*/*")] if p.is_dir())


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


def _pool_port() -> tuple[int, list[socket.socket]]:
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


def _reap() -> None:
    for child in list(_children):
        if child.poll() is not None:
            _children.remove(child)


def _tail(folder: str, name: str, lines: int = 25) -> str:
    try:
        with open(os.path.join(folder, name), encoding="utf-8", errors="replace") as handle:
            tail = handle.read().splitlines()[-lines:]
    except FileNotFoundError:
        return f"(no {name})"
    return f"--- {name} (last {len(tail)} lines)\n" + "\n".join(tail)


def _running(folder: str) -> dict[str, Any] | None:
    """The state of the folder's pool if its supervisor is alive and the server is up."""
    state = read_state(folder)
    if state and state.get("phase") == "running" and is_supervisor(state.get("supervisor_pid"), folder):
        return state
    return None


def _kill_all(folder: str, grace_s: float = 30.0) -> bool:
    """Stop the supervisor (it stops its server), then anything of the pool still alive; remove the state.

    Returns whether any process of the pool was running (stale state alone does not count).
    Raises WarmPoolStopError if a process survives SIGKILL.
    """
    _reap()
    state = read_state(folder)
    found = pool_processes(folder)
    supervisor = is_supervisor(state.get("supervisor_pid") if state else None, folder)
    if supervisor is not None:
        with contextlib.suppress(psutil.Error):
            supervisor.terminate()
        wait_gone([supervisor], grace_s)
        _reap()
    try:
        terminate_processes(lambda: pool_processes(folder), 10.0, f"warm pool in {folder}", before_check=_reap)
    except ProcessTreeSurvivedError as exc:
        raise WarmPoolStopError(str(exc)) from exc
    remove_state(folder)
    remove_token(folder)  # the next pool gets a token of its own
    remove_leases(folder)
    return bool(found)


def connection_storage_options(settings: Any) -> dict[str, Any]:
    """The storage root's fsspec options as a region of this connection gets them (``storage_conn_id``'s
    credentials; for ``hdfs://``, the NameNode's web address from ``hadoop_conf_dir``); empty for a local root."""
    if settings.storage_is_local:
        return {}  # no Airflow connection to read
    from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook

    return FineGrainedSparkHook().storage_options(settings)


def ensure_started(
    settings: Any,
    folder: str | None = None,
    *,
    storage_options: Mapping[str, Any] | None = None,
    idle_timeout_s: float | None = None,
    start_timeout_s: float = DEFAULT_START_TIMEOUT_S,
    health_timeout_s: float = DEFAULT_HEALTH_TIMEOUT_S,
) -> WarmPool:
    """The folder's pool, started if it is not running; healthy when returned.

    Two callers at once start one pool: the second waits on the folder's lock and finds the first's.
    A stale pool (dead supervisor, unhealthy server, another master, shape or storage credentials, or no
    token: started before pools were locked) with no region in it is stopped and replaced; one with
    other storage credentials and regions running in it is not used (WarmPoolUnavailable). The server
    reaches the storage root with `storage_options` (default: the connection's, see
    :func:`connection_storage_options`) as ``spark.hadoop.*``, the returned pool carries them for the
    task's side. `idle_timeout_s` overrides the connection's ``warm_idle_timeout``.
    """
    folder = os.path.abspath(folder or auto_folder(settings))
    shape = pool_shape(settings)
    if storage_options is None:
        storage_options = connection_storage_options(settings)
    storage_conf = storage_spark_conf(settings, storage_options)
    with start_lock(folder, start_timeout_s) as held:
        if not held:
            raise WarmPoolUnavailable(
                f"the warm pool in {folder} has been starting for over {start_timeout_s:g} s in another process"
            )
        state = _running(folder)
        if state is not None:
            pool = pool_from_state(folder, state)
            same = state.get("master") == server_master(settings) and pool.shape == shape
            # A pool without a token (started before pools were locked) accepts anyone: replace it once idle.
            same = same and pool.token is not None
            # Started before pools were reached as localhost: no guard holds its port on ::1 (hold_localhost).
            guarded = urlsplit(pool.url).hostname == POOL_HOST
            # Started without this root's credentials, or with others: its regions could not reach the root.
            same_storage = state.get("storage") == storage_identity(settings, storage_conf, pool.token)
            if not same_storage and live_leases(folder):
                raise WarmPoolUnavailable(
                    f"the warm pool in {folder} runs with other storage credentials or Hadoop configuration "
                    "than this connection's, and regions are running in it; it is replaced once they end"
                )
            if (same and same_storage and guarded) or live_leases(folder):
                try:
                    # It answered a query when it started and its supervisor watches the JVM: the channel will do.
                    check_health(pool.url, health_timeout_s, query=False, token=pool.token)
                    touch_last_used(folder)
                    return replace(pool, storage_options=dict(storage_options))
                except WarmPoolUnavailable as exc:
                    log.warning("Restarting the warm pool in %s: %s", folder, exc)
            elif pool.token is None:
                log.info("Restarting the warm pool in %s: it has no token, so it would accept any client", folder)
            elif not guarded:
                log.info(
                    "Restarting the warm pool in %s: its URL %s is not %s, so its port is unguarded on ::1",
                    folder,
                    pool.url,
                    POOL_HOST,
                )
            elif not same_storage:
                log.info(
                    "Restarting the warm pool in %s: it was started with other storage credentials or Hadoop "
                    "configuration than this connection's for %s",
                    folder,
                    settings.storage_root,
                )
            else:
                log.info("Restarting the warm pool in %s for master %s and %s", folder, settings.master, shape)
        if _kill_all(folder):
            log.info("Stopped what was left of an earlier warm pool in %s", folder)
        timeout = settings.warm_idle_timeout if idle_timeout_s is None else idle_timeout_s
        pool = _start(settings, folder, shape, storage_conf, float(timeout), start_timeout_s, health_timeout_s)
        return replace(pool, storage_options=dict(storage_options))


def _start(
    settings: Any,
    folder: str,
    shape: PoolShape,
    storage_conf: Mapping[str, str],
    idle_timeout_s: float,
    start_timeout_s: float,
    health_timeout_s: float,
) -> WarmPool:
    check_java(settings.java_home)
    began = time.monotonic()
    supervisor, spec = _spawn(settings, folder, shape, storage_conf, idle_timeout_s, start_timeout_s)
    _children.append(supervisor)
    assert supervisor.stdin is not None
    # Through stdin, so that the token and secret Spark properties are on no command line.
    supervisor.stdin.write(json.dumps(spec).encode())
    supervisor.stdin.close()
    deadline = began + start_timeout_s
    try:
        while True:
            state = read_state(folder)
            phase = None if state is None or state.get("supervisor_pid") != supervisor.pid else state.get("phase")
            if phase == "running" and state is not None:
                pool = pool_from_state(folder, state)
                check_health(pool.url, health_timeout_s, token=pool.token)
                touch_last_used(folder)
                log.info("Warm pool started at %s in %.1f s (%s)", pool.url, time.monotonic() - began, folder)
                return pool
            if phase == "failed" and state is not None:
                raise WarmPoolUnavailable(f"the warm pool in {folder} did not start: {state.get('error')}")
            if supervisor.poll() is not None:
                raise WarmPoolUnavailable(f"the warm pool's supervisor exited with code {supervisor.returncode}")
            if time.monotonic() > deadline:
                raise WarmPoolUnavailable(f"the warm pool in {folder} was not running after {start_timeout_s:g} s")
            time.sleep(0.25)
    except BaseException as exc:
        try:
            _kill_all(folder, grace_s=10.0)
        except WarmPoolStopError as stop_exc:
            exc.add_note(str(stop_exc))
        if isinstance(exc, WarmPoolUnavailable):
            raise WarmPoolUnavailable(f"{exc}\n{_tail(folder, SUPERVISOR_LOG)}\n{_tail(folder, SERVER_LOG)}") from None
        raise


def _spawn(
    settings: Any,
    folder: str,
    shape: PoolShape,
    storage_conf: Mapping[str, str],
    idle_timeout_s: float,
    start_timeout_s: float,
) -> tuple[subprocess.Popen[bytes], dict[str, Any]]:
    """Start the pool's supervisor on a fresh port and token; its launch spec (secrets inside: never logged)."""
    port, guards = _pool_port()
    with contextlib.ExitStack() as held:
        for guard in guards:
            held.enter_context(guard)  # this process's copies close once the supervisor has its own
        ui_port = free_port()
        token = new_token()
        write_token(folder, token)  # 0600: the tasks of this user read it; nobody else can
        spec = {
            "command": server_command(settings, shape, port, ui_port, folder, storage_conf),
            # Secrets reach the server through its environment (the token) and a 0600 properties file the
            # supervisor writes for the JVM's start-up (secret Spark settings, the storage's too): never its argv.
            "token": token,
            "secret_conf": server_secret_conf(settings, storage_conf),
            "url": pool_url(port),
            "port": port,
            "shape": shape.to_dict(),
            "master": server_master(settings),
            "storage": storage_identity(settings, storage_conf, token),
            "idle_timeout": idle_timeout_s,
            "start_timeout": start_timeout_s,
        }
        with open(os.path.join(folder, SUPERVISOR_LOG), "ab") as out:
            # A session of its own: the pool outlives the Airflow task (or CLI) that started it. It inherits the
            # guards of the port's other loopback addresses and keeps them open as long as it lives.
            supervisor = subprocess.Popen(
                [sys.executable, "-m", SUPERVISOR_MODULE, "--folder", folder],
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=folder,
                env=server_env(settings),
                start_new_session=True,
                pass_fds=[guard.fileno() for guard in guards],
            )
    return supervisor, spec


def stop(folder: str, timeout_s: float = STOP_TIMEOUT_S) -> bool:
    """Stop the folder's pool and wait until every process of it is gone; False if none was running.

    Waits (up to `timeout_s`) for a start in progress to finish first, so it stops that pool too.
    """
    folder = os.path.abspath(folder)
    if not os.path.isdir(folder):
        return False
    with start_lock(folder, timeout_s):
        return _kill_all(folder)


def status(folder: str) -> dict[str, Any] | None:
    """The folder's pool as recorded, with whether it lives, its processes, RSS, leases and idle time."""
    folder = os.path.abspath(folder)
    _reap()
    state = read_state(folder)
    procs = pool_processes(folder)
    if state is None and not procs:
        return None
    info: dict[str, Any] = dict(state or {"phase": "orphaned"})
    alive = state is not None and is_supervisor(state.get("supervisor_pid"), folder) is not None
    if state is not None and not alive:
        info["phase"] = "stale"
    rss = 0
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            rss += int(proc.memory_info().rss)
    used = max(last_used(folder), float(info.get("ready_at", 0.0)))
    info.update(
        folder=folder,
        alive=alive,
        pids=sorted(p.pid for p in procs),
        rss_bytes=rss,
        leases=live_leases(folder),
        idle_s=round(time.time() - used, 1) if used else None,
    )
    return info


def pool_for(settings: Any, storage_options: Mapping[str, Any] | None = None) -> WarmPool | None:
    """The pool a connection names: None for ``off``, the started pool for ``auto``, a checked external server.

    An external server is ``sc://host:port`` (a ``;token=`` in it is taken out of the URL the pool shows)
    or ``conn:<conn_id>``, an Airflow connection whose host and port name the server and whose password
    is its token; it reaches the storage root with its own settings, the task with `storage_options`.
    `storage_options` default to the connection's (:func:`connection_storage_options`).
    """
    mode = settings.warm_pool
    if mode == "off":
        return None
    if mode == "auto":
        return ensure_started(settings, storage_options=storage_options)
    if mode.startswith(CONN_PREFIX):
        url, token = external_from_connection(mode.removeprefix(CONN_PREFIX))
    else:
        url, token = split_token(mode)
    check_health(url, DEFAULT_HEALTH_TIMEOUT_S, token=token)
    options = connection_storage_options(settings) if storage_options is None else dict(storage_options)
    return WarmPool(
        url=url,
        folder=None,
        shape=None,
        application_id=None,
        ui_url=None,
        started_at=0.0,
        token=token,
        storage_options=options,
    )


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


@contextlib.contextmanager
def in_use(pool: WarmPool, timeout_s: float = DEFAULT_START_TIMEOUT_S) -> Iterator[Lease]:
    """Hold a lease on `pool` while a region runs in it: the idle timer does not stop a leased pool.

    Record each Connect session the region opens with ``lease.record_session``: if this process dies,
    the pool's supervisor interrupts and releases them. Raises WarmPoolUnavailable if the pool has
    stopped since it was found (call ensure_started again). An external server (no folder) is not the
    provider's to stop, so nothing is held.
    """
    if pool.folder is None:
        yield Lease(pool)
        return
    with contextlib.ExitStack() as stack:
        # Under the start lock, which the idle stop also takes: the pool cannot stop between check and lease.
        with start_lock(pool.folder, timeout_s) as held:
            state = _running(pool.folder)
            if not held or state is None or state.get("url") != pool.url:
                raise WarmPoolUnavailable(
                    f"the warm pool {pool.url} in {pool.folder} is no longer running (idle timeout or stop); "
                    "start it again with ensure_started"
                )
            lease = stack.enter_context(hold_lease(pool.folder, pool))
        yield lease
