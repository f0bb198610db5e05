"""``cluster start|status|stop --dir D``: a local Spark standalone cluster on 127.0.0.1 for trying things out."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from typing import Any

GiB_IN_MiB = 1024


def add_parser(commands: Any) -> None:
    cluster = commands.add_parser("cluster", help="start, inspect or stop a local Spark standalone cluster")
    actions = cluster.add_subparsers(dest="action", required=True)
    start = actions.add_parser("start", help="start a master and workers on 127.0.0.1 (daemons; stop them later)")
    start.add_argument("--dir", required=True, help="work directory: logs, pids, worker dirs and cluster.json")
    start.add_argument("--workers", type=int, default=2)
    start.add_argument("--cores", type=int, default=2, help="cores per worker")
    start.add_argument("--memory", default="4g", help="memory per worker, e.g. 4g or 1536m")
    start.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for every worker to be ALIVE")
    start.set_defaults(handler=_start)
    status = actions.add_parser("status", help="print the master's view of the cluster in --dir")
    status.add_argument("--dir", required=True)
    status.add_argument("--json", action="store_true", help="print the master's /json/ answer")
    status.set_defaults(handler=_status)
    stop = actions.add_parser("stop", help="stop the cluster in --dir and everything it runs")
    stop.add_argument("--dir", required=True)
    stop.set_defaults(handler=_stop)


def _memory_mib(memory: str) -> int:
    value, unit = int(memory[:-1]), memory[-1].lower()
    return value * GiB_IN_MiB if unit == "g" else value


def _format_mib(mib: int) -> str:
    return f"{mib // GiB_IN_MiB}g" if mib % GiB_IN_MiB == 0 else f"{mib}m"


def connection_extra(
    workers: int, cores_per_worker: int, memory_per_worker: str, webui_url: str, storage_root: str
) -> dict[str, Any]:
    """Connection extras that fit the cluster: one executor per worker, three quarters of its memory.

    The quarter left over keeps the executor's JVM overhead, and a cluster-mode driver, inside the worker.
    """
    worker_mib = _memory_mib(memory_per_worker)
    return {
        "master_webui_url": webui_url,
        "total_cores": workers * cores_per_worker,
        "total_memory": _format_mib(workers * worker_mib),
        "executor_cores": cores_per_worker,
        "executor_memory": _format_mib(max(512, worker_mib * 3 // 4)),
        "storage_root": storage_root,
        "spark_conf": {"spark.pyspark.python": sys.executable},
    }


def _start(args: argparse.Namespace) -> int:
    from airflow_provider_finegrained.spark.java import SparkEnvironmentError
    from airflow_provider_finegrained.spark.standalone import ClusterStartError
    from airflow_provider_finegrained.spark.standalone_start import start_local_cluster

    try:
        cluster = start_local_cluster(args.dir, args.workers, args.cores, args.memory, args.timeout)
    except (ClusterStartError, SparkEnvironmentError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    extra = connection_extra(
        args.workers, args.cores, args.memory, cluster.webui_url, os.path.join(cluster.work_dir, "storage")
    )
    print(f"master:  {cluster.master_url}")
    print(f"web UI:  {cluster.webui_url}")
    print(f"workers: {args.workers} x {args.cores} cores, {args.memory} ({', '.join(cluster.worker_webui_urls)})")
    print(f"state:   {os.path.join(cluster.work_dir, 'cluster.json')}")
    print_connection(cluster.master_url, extra, f"cluster stop --dir {shlex.quote(cluster.work_dir)}")
    return 0


def print_connection(host: str, extra: dict[str, Any], stop: str) -> None:
    """The ``airflow connections add`` line that points the default connection at a loopback cluster."""
    command = ["airflow", "connections", "add", "finegrained_spark_default", "--conn-type", "finegrained_spark"]
    command += ["--conn-host", host, "--conn-extra", json.dumps(extra)]
    print("Point Airflow's default finegrained_spark connection at it:")
    print(shlex.join(command))
    print(f"Stop it with: python -m airflow_provider_finegrained {stop}")


def _status(args: argparse.Namespace) -> int:
    from airflow_provider_finegrained.launchers.http import HttpRequestError
    from airflow_provider_finegrained.spark.standalone import ClusterNotFoundError, load_cluster

    try:
        cluster = load_cluster(args.dir)
        status = cluster.status()
    except ClusterNotFoundError as exc:
        print(f"not running: {exc}", file=sys.stderr)
        return 1
    except HttpRequestError as exc:
        print(f"not reachable: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    print(f"master:  {cluster.master_url} ({status.get('status')})")
    print(f"web UI:  {cluster.webui_url}")
    print(f"workers: {status.get('aliveworkers', 0)} alive of {len(status.get('workers', []))}")
    print(f"cores:   {status.get('coresused', 0)} used of {status.get('cores', 0)}")
    print(f"memory:  {status.get('memoryused', 0)} MiB used of {status.get('memory', 0)} MiB")
    for key, label in (("activeapps", "apps"), ("activedrivers", "drivers")):
        running = [f"{item.get('id')} ({item.get('state')})" for item in status.get(key, [])]
        print(f"{label}:{' ' * (8 - len(label))}{', '.join(running) or 'none running'}")
    return 0


def _stop(args: argparse.Namespace) -> int:
    from airflow_provider_finegrained.spark.standalone import ClusterNotFoundError, ClusterStopError, load_cluster

    try:
        cluster = load_cluster(args.dir)
        cluster.stop()
    except ClusterNotFoundError as exc:
        print(f"not running: {exc}", file=sys.stderr)
        return 1
    except ClusterStopError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"stopped {cluster.master_url} ({cluster.work_dir})")
    return 0
