#!/usr/bin/env bash
# System packages the test suite uses, from Debian's archive: Chromium (the dashboard's browser
# tests, driven by Playwright), Prometheus (a real scraper for the /metrics tests), tmux (the
# terminal views under a real terminal), npm (to install axe-core, the accessibility engine the
# browser tests inject, from tests/views/a11y/package-lock.json). Skips what is already installed;
# needs root or sudo for apt.
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
a11y() {
  if [ ! -f "$here/tests/views/a11y/node_modules/axe-core/axe.min.js" ]; then
    npm ci --prefix "$here/tests/views/a11y" --no-audit --no-fund --loglevel=error
  fi
}
need=()
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v npm >/dev/null 2>&1 || need+=(npm)
if [ ${#need[@]} -eq 0 ]; then
  a11y
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
a11y
