#!/usr/bin/env bash
# A local Spark standalone cluster on 127.0.0.1 from the installed pyspark, for trying the provider out.
#   scripts/standalone_cluster.sh start  --dir /tmp/fg-cluster [--workers 2] [--cores 2] [--memory 4g]
#   scripts/standalone_cluster.sh status --dir /tmp/fg-cluster [--json]
#   scripts/standalone_cluster.sh stop   --dir /tmp/fg-cluster
# The daemons keep running after `start` returns: stop them with `stop`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
case "${1:-}" in
    start|status|stop) ;;
    *) echo "usage: $0 start|status|stop --dir DIR [options]" >&2; exit 2 ;;
esac
# bootstrap.sh logs to stderr; keep stdout for what the cluster command prints.
source scripts/bootstrap.sh
exec python -m airflow_provider_finegrained cluster "$@"
