#!/usr/bin/env bash
# System packages the test suite uses, from Debian's archive: Chromium (the dashboard's browser
# tests, driven by Playwright), Prometheus (a real scraper for the /metrics tests), tmux (the
# terminal views under a real terminal). Skips what is already installed; needs root or sudo.
set -euo pipefail
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq "${need[@]}" >/dev/null
echo "installed: ${need[*]}"
