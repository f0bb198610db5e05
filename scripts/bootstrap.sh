#!/usr/bin/env bash
# Sets up everything the project needs from the package registries, idempotently:
# Java 17 (Debian's OpenJDK, if no Java 17+ is on PATH), a virtual environment in .venv and the
# package with its dev extras. Sourced by quickstart.sh and test.sh; safe to run again.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PYTHON_BIN="${PYTHON:-python3.11}"

log() { printf '[bootstrap] %s\n' "$*" >&2; }

java_major() {
    command -v java >/dev/null 2>&1 || { echo 0; return; }
    java -version 2>&1 | awk -F'"' '/version/ {split($2, v, "."); print (v[1] == "1" ? v[2] : v[1]); exit}'
}

ensure_java() {
    local major
    major="$(java_major)"
    if [ "${major:-0}" -ge 17 ] 2>/dev/null; then
        return
    fi
    log "Java 17+ not found (found: ${major:-none}); installing openjdk-17-jre-headless with apt"
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null 2>&1 || {
            log "need root or sudo to install Java; install OpenJDK 17 and re-run"; exit 1; }
        sudo="sudo"
    fi
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq openjdk-17-jre-headless >/dev/null
    major="$(java_major)"
    [ "${major:-0}" -ge 17 ] || { log "Java install failed: java -version reports ${major:-nothing}"; exit 1; }
}

ensure_maven() {
    # Maven fetches the loopback Hadoop cluster's jars from Maven Central (spark/hadoop_cluster.py).
    command -v mvn >/dev/null 2>&1 && return
    log "mvn not found; installing maven with apt"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq maven >/dev/null
}

ensure_rehearsal_packages() {
    # The multi-host rehearsal (rehearsal/, tests/rehearsal): PostgreSQL, Redis and namespaces tools, from
    # Debian. Called by test.sh and rehearsal.sh only: the quick start needs none of them.
    local missing=()
    [ -x /usr/lib/postgresql/15/bin/postgres ] || missing+=(postgresql-15)
    command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
    command -v ip >/dev/null 2>&1 || missing+=(iproute2)
    command -v nsenter >/dev/null 2>&1 || missing+=(util-linux)
    [ ${#missing[@]} -eq 0 ] && return
    log "installing ${missing[*]} with apt (the multi-host rehearsal)"
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
}

ensure_venv() {
    command -v "$PYTHON_BIN" >/dev/null 2>&1 || PYTHON_BIN=python3
    "$PYTHON_BIN" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || {
        log "Python 3.11 is required (set PYTHON=/path/to/python3.11)"; exit 1; }
    if [ ! -x "$VENV/bin/python" ]; then
        log "creating $VENV"
        "$PYTHON_BIN" -m venv "$VENV"
    fi
    # Reinstall only when the dependency declaration changed since the last install.
    local stamp="$VENV/.installed-$(sha256sum "$ROOT/pyproject.toml" | cut -c1-16)"
    if [ ! -f "$stamp" ]; then
        log "installing the package and its dependencies (uv, about a minute)"
        "$VENV/bin/python" -m pip install -q --upgrade pip uv
        "$VENV/bin/uv" pip install -q --python "$VENV/bin/python" -e "$ROOT[dev]"
        rm -f "$VENV"/.installed-*
        touch "$stamp"
    fi
}

ensure_java
ensure_maven
ensure_venv
export PATH="$VENV/bin:$PATH"
export SPARK_LOCAL_IP="${SPARK_LOCAL_IP:-127.0.0.1}"
