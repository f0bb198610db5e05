#!/usr/bin/env bash
# Installs Debian's headless-capable Chromium and its chromedriver for the UI tests (tests/ui), when
# /usr/bin/chromium is missing. Idempotent; needs root or sudo and the Debian package registry.
set -euo pipefail

log() { printf '[install_browser] %s\n' "$*" >&2; }

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { log "need root or sudo to install chromium; install it and re-run"; exit 1; }
    sudo="sudo"
fi
log "installing chromium and chromium-driver with apt-get"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
[ -x /usr/bin/chromium ] || { log "chromium install failed: /usr/bin/chromium is missing"; exit 1; }
[ -x /usr/bin/chromedriver ] || { log "chromium-driver install failed: /usr/bin/chromedriver is missing"; exit 1; }
log "$(/usr/bin/chromium --version 2>/dev/null || echo chromium installed)"
