"""``warm start|status|stop [--dir D] [--conn-id ID]``: the warm Spark Connect pool of a connection.

``warm start`` prints the pool's public URL, ``sc://localhost:PORT`` (a client adds ``;token=`` and the
content of the pool's token file); ``--client-url`` prints the URL with the token, a secret.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

DEFAULT_CONN_ID = "finegrained_spark_default"


def add_parser(commands: Any) -> None:
    warm = commands.add_parser("warm", help="start, inspect or stop the warm Spark Connect pool")
    actions = warm.add_subparsers(dest="action", required=True)
    for name, handler, text in (
        ("start", _start, "start the pool (if it is not running) and print its sc:// URL"),
        ("status", _status, "print the pool's state, processes and memory"),
        ("stop", _stop, "stop the pool and every process of it"),
    ):
        action = actions.add_parser(name, help=text)
        action.add_argument("--dir", help="the pool's folder (default: <storage_root>/_warm/<host>/<master>)")
        action.add_argument("--conn-id", default=DEFAULT_CONN_ID, help="the finegrained_spark connection")
        action.set_defaults(handler=handler)
        if name == "start":
            action.add_argument(
                "--idle-timeout", type=float, help="seconds idle before it stops (default: the connection's)"
            )
            action.add_argument(
                "--client-url",
                action="store_true",
                help="print the URL a client connects with, token included (a secret: never printed without this)",
            )
        if name == "status":
            action.add_argument("--json", action="store_true", help="print the state as JSON")


def _settings(conn_id: str) -> Any:
    from airflow_provider_finegrained.hooks.finegrained_spark import FineGrainedSparkHook

    return FineGrainedSparkHook(conn_id).get_settings()


def _folder(args: argparse.Namespace) -> str:
    from airflow_provider_finegrained.warm import auto_folder

    return str(args.dir) if args.dir else auto_folder(_settings(args.conn_id))


def _start(args: argparse.Namespace) -> int:
    from airflow_provider_finegrained.spark.java import SparkEnvironmentError
    from airflow_provider_finegrained.warm import WarmPoolUnavailable, ensure_started
    from airflow_provider_finegrained.warm.auth import TOKEN_FILE, client_url

    settings = _settings(args.conn_id)
    try:
        pool = ensure_started(settings, args.dir, idle_timeout_s=args.idle_timeout)
    except (WarmPoolUnavailable, SparkEnvironmentError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    shape = pool.shape
    # The public URL by default; a client adds ";token=" and the token file's content (docs/warm.md).
    print(client_url(pool.url, pool.token) if args.client_url else pool.url)
    print(f"folder:  {pool.folder}", file=sys.stderr)
    if pool.folder is not None and pool.token is not None:
        token_file = os.path.join(pool.folder, TOKEN_FILE)
        # client_url's host (localhost, also for a pool an earlier version recorded as 127.0.0.1), not the token.
        shown = client_url(pool.url, "TOKEN").replace("TOKEN", "<its content>")
        print(f"token:   {token_file} (a client connects with {shown})", file=sys.stderr)
    if shape is not None:
        executors = "local" if shape.local else f"{shape.min_executors}..{shape.max_executors} executors"
        print(f"shape:   {executors} of {shape.executor_cores} cores, {shape.executor_memory} bytes", file=sys.stderr)
    if pool.ui_url:
        print(f"web UI:  {pool.ui_url} ({pool.application_id})", file=sys.stderr)
    return 0


def _status(args: argparse.Namespace) -> int:
    from airflow_provider_finegrained.warm import status

    folder = _folder(args)
    info = status(folder)
    if info is None:
        print(f"not running: no warm pool in {folder}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(f"{info.get('url')} {info['phase']}")
        for key in ("folder", "application_id", "ui_url", "master", "pids", "rss_bytes", "leases", "idle_s"):
            print(f"{key + ':':<16}{info.get(key)}")
    return 0 if info.get("alive") else 1


def _stop(args: argparse.Namespace) -> int:
    from airflow_provider_finegrained.warm import WarmPoolStopError, stop

    folder = _folder(args)
    try:
        stopped = stop(folder)
    except WarmPoolStopError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"stopped the warm pool in {folder}" if stopped else f"no warm pool was running in {folder}")
    return 0
