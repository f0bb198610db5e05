"""Starting a pool: once per folder however many ask, reusing a running one that still fits the connection."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from typing import Any
from urllib.parse import urlsplit

from airflow_provider_finegrained.spark.java import check_java
from airflow_provider_finegrained.warm.auth import new_token, write_token
from airflow_provider_finegrained.warm.control import (
    WarmPoolStopError,
    kill_all,
    log_tail,
    remember_child,
    running_state,
)
from airflow_provider_finegrained.warm.folders import auto_folder
from airflow_provider_finegrained.warm.health import check_health
from airflow_provider_finegrained.warm.loopback import POOL_HOST, pool_port, pool_url
from airflow_provider_finegrained.warm.server import (
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
    WarmPool,
    WarmPoolUnavailable,
    live_leases,
    pool_from_state,
    read_state,
    start_lock,
    touch_last_used,
)

log = logging.getLogger(__name__)

DEFAULT_START_TIMEOUT_S = 300.0
DEFAULT_HEALTH_TIMEOUT_S = 10.0


def connection_storage_options(settings: Any) -> dict[str, Any]:
    """The storage root's fsspec options as a region of this connection gets them (``storage_conn_id``'s
    credentials; for ``hdfs://``, the NameNode's web address from ``hadoop_conf_dir``); empty for a local root."""
    if settings.storage_is_local:
        return {}  # no Airflow connection to read
    from airflow_provider_finegrained.hooks.airflow_connection import DEFAULT_CONN_ID
    from airflow_provider_finegrained.hooks.storage_connection import connection_storage_options as read_options

    return read_options(settings, DEFAULT_CONN_ID)


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
        state = running_state(folder)
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
        if kill_all(folder):
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
    remember_child(supervisor)
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
            kill_all(folder, grace_s=10.0)
        except WarmPoolStopError as stop_exc:
            exc.add_note(str(stop_exc))
        if isinstance(exc, WarmPoolUnavailable):
            raise WarmPoolUnavailable(
                f"{exc}\n{log_tail(folder, SUPERVISOR_LOG)}\n{log_tail(folder, SERVER_LOG)}"
            ) from None
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
    port, guards = pool_port()
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
