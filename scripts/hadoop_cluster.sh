#!/usr/bin/env bash
# A real Hadoop cluster on 127.0.0.1 (YARN: a ResourceManager and NodeManagers; HDFS: a NameNode and a
# DataNode, WebHDFS on) from Maven Central's hadoop-client-minicluster, at the Hadoop version pyspark bundles.
#   scripts/hadoop_cluster.sh start  --dir /tmp/fg-hadoop [--nodemanagers 2] [--vcores 2] [--memory-mb 4096]
#   scripts/hadoop_cluster.sh status --dir /tmp/fg-hadoop [--json]
#   scripts/hadoop_cluster.sh stop   --dir /tmp/fg-hadoop
# The cluster keeps running after `start` returns: stop it with `stop`. The first start fetches its jars
# with Maven (about 130 MB into ~/.m2).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
case "${1:-}" in
    start|status|stop) ;;
    *) echo "usage: $0 start|status|stop --dir DIR [options]" >&2; exit 2 ;;
esac
# bootstrap.sh logs to stderr; keep stdout for what the cluster command prints.
source scripts/bootstrap.sh
exec python -m airflow_provider_finegrained hadoop "$@"
