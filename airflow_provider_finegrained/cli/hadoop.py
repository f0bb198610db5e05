"""``hadoop start|status|stop --dir D``: a real Hadoop cluster (YARN and HDFS) on 127.0.0.1 for trying things out."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from typing import Any

from airflow_provider_finegrained.cli.cluster import print_connection
from airflow_provider_finegrained.spark.hadoop_cluster import HadoopCluster


def add_parser(commands: Any) -> None:
    hadoop = commands.add_parser("hadoop", help="start, inspect or stop a loopback Hadoop cluster (YARN and HDFS)")
    actions = hadoop.add_subparsers(dest="action", required=True)
    start = actions.add_parser("start", help="start HDFS and YARN on 127.0.0.1 (runs on; stop it later)")
    start.add_argument("--dir", required=True, help="work directory: HDFS blocks, containers, logs, conf, hadoop.json")
    start.add_argument("--nodemanagers", type=int, default=2, help="0: HDFS alone, without YARN")
    start.add_argument(
        "--host", default="127.0.0.1", help="the address other hosts reach HDFS at (default: this host only)"
    )
    start.add_argument("--vcores", type=int, default=2, help="cores per NodeManager")
    start.add_argument("--memory-mb", type=int, default=4096, help="container memory per NodeManager, MiB")
    start.add_argument("--small-queue-percent", type=int, default=25, help="the 'small' queue's share, percent")
    start.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for every service")
    start.set_defaults(handler=_start)
    status = actions.add_parser("status", help="print the ResourceManager's view of the cluster in --dir")
    status.add_argument("--dir", required=True)
    status.add_argument("--json", action="store_true", help="print the metrics and nodes as JSON")
    status.set_defaults(handler=_status)
    stop = actions.add_parser("stop", help="stop the cluster in --dir and every container it runs")
    stop.add_argument("--dir", required=True)
    stop.set_defaults(handler=_stop)


def connection_extra(cluster: HadoopCluster) -> dict[str, Any]:
    """Connection extras that fit the cluster: 1-core, 1 GiB executors (two per NodeManager), an hdfs:// root.

    ``spark.yarn.jars`` names the Spark jars on this machine (every NodeManager is here), so a submit does
    not upload them. The containers' Python is this environment, packed and shipped by ``python_env`` (auto).
    """
    return {
        "hadoop_conf_dir": cluster.conf_dir,
        "yarn_resourcemanager_url": cluster.resourcemanager_url,
        "total_cores": cluster.nodemanagers * cluster.vcores_per_node,
        "total_memory": f"{cluster.nodemanagers * cluster.memory_mb_per_node}m",
        "executor_cores": 1,
        "executor_memory": "1g",
        "storage_root": cluster.storage_root(),
        "spark_conf": {
            "spark.yarn.jars": f"local:{spark_jars()}/*",
            "spark.yarn.am.memory": "512m",
        },
    }


def spark_jars() -> str:
    from airflow_provider_finegrained.spark.submit import spark_home

    return os.path.join(spark_home(), "jars")


def _start(args: argparse.Namespace) -> int:
    from airflow_provider_finegrained.spark.hadoop_cluster import HadoopClusterError, start_hadoop_cluster
    from airflow_provider_finegrained.spark.java import SparkEnvironmentError

    try:
        cluster = start_hadoop_cluster(
            args.dir,
            nodemanagers=args.nodemanagers,
            vcores_per_node=args.vcores,
            memory_mb_per_node=args.memory_mb,
            small_queue_percent=args.small_queue_percent,
            timeout_s=args.timeout,
            host=args.host,
        )
    except (HadoopClusterError, SparkEnvironmentError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"Hadoop:          {cluster.hadoop_version} (the version pyspark bundles)")
    if cluster.nodemanagers:
        print(f"ResourceManager: {cluster.resourcemanager_url} (RPC {cluster.resourcemanager_address})")
        nodes = f"{cluster.nodemanagers} x {cluster.vcores_per_node} vcores, {cluster.memory_mb_per_node} MiB"
        print(f"NodeManagers:    {nodes}")
    print(f"HDFS:            {cluster.default_fs}, NameNode UI and WebHDFS {cluster.namenode_http_url}")
    print(f"HADOOP_CONF_DIR: {cluster.conf_dir}")
    print_connection("yarn", connection_extra(cluster), f"hadoop stop --dir {shlex.quote(cluster.work_dir)}")
    return 0


def _status(args: argparse.Namespace) -> int:
    from airflow_provider_finegrained.launchers.http import HttpRequestError
    from airflow_provider_finegrained.spark.hadoop_cluster import HadoopClusterNotFoundError, load_hadoop_cluster

    try:
        cluster = load_hadoop_cluster(args.dir)
        status = cluster.status()
    except HadoopClusterNotFoundError as exc:
        print(f"not running: {exc}", file=sys.stderr)
        return 1
    except HttpRequestError as exc:
        print(f"not reachable: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(status, indent=2))
        return 0
    metrics = status["metrics"]
    print(f"ResourceManager: {cluster.resourcemanager_url}")
    print(f"HDFS:            {cluster.default_fs} ({cluster.namenode_http_url})")
    print(f"nodes:           {metrics.get('activeNodes', 0)} active of {len(status['nodes'])}")
    print(f"vcores:          {metrics.get('allocatedVirtualCores', 0)} used of {metrics.get('totalVirtualCores', 0)}")
    print(f"memory:          {metrics.get('allocatedMB', 0)} MiB used of {metrics.get('totalMB', 0)} MiB")
    print(f"applications:    {metrics.get('appsRunning', 0)} running, {metrics.get('appsPending', 0)} pending")
    return 0


def _stop(args: argparse.Namespace) -> int:
    from airflow_provider_finegrained.spark.hadoop_cluster import (
        HadoopClusterError,
        HadoopClusterNotFoundError,
        load_hadoop_cluster,
    )

    try:
        cluster = load_hadoop_cluster(args.dir)
        cluster.stop()
    except HadoopClusterNotFoundError as exc:
        print(f"not running: {exc}", file=sys.stderr)
        return 1
    except HadoopClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"stopped the Hadoop cluster in {cluster.work_dir}")
    return 0
