#!/usr/bin/env bash
# Airflow, Spark and an S3 root on six hosts of this machine (network, mount and UTS namespaces):
#   bash scripts/rehearsal.sh up     # make the hosts, start every service (about 3 minutes)
#   bash scripts/rehearsal.sh run    # run the DAGs there, check their answers
#   bash scripts/rehearsal.sh status # processes per host
#   bash scripts/rehearsal.sh down   # stop everything, remove the hosts: nothing is left
# Needs root (ip netns, mount). PostgreSQL and Redis come from Debian's packages, installed if missing.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/bootstrap.sh
[ "$(id -u)" -eq 0 ] || { echo "[rehearsal] needs root (network and mount namespaces)" >&2; exit 1; }
ensure_rehearsal_packages
exec python -m rehearsal "$@"
