#!/usr/bin/env bash
# Installs what runloopd needs on Debian/Ubuntu, only what is missing.
#   scripts/install-deps.sh          build + run needs (libmicrohttpd, SQLite for GRDB, libpq for the
#                                    PostgreSQL store, pkg-config, curl)
#   scripts/install-deps.sh test     plus what the tests use (python3 + pip, chromium, chromium-driver,
#                                    postgresql for scripts/with-postgres.sh, openssl for its TLS
#                                    certificates, prometheus for Tests/prometheus: /usr/bin/prometheus
#                                    and promtool)
set -euo pipefail
want=(libmicrohttpd-dev libsqlite3-dev libpq-dev pkg-config curl ca-certificates)
if [ "${1:-}" = "test" ]; then want+=(chromium chromium-driver python3 python3-pip postgresql openssl prometheus); fi
missing=()
for pkg in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
# python3/pip may come from elsewhere (pyenv); don't install Debian's over them.
if command -v python3 >/dev/null && python3 -m pip --version >/dev/null 2>&1; then
  missing=("${missing[@]/python3}"); missing=("${missing[@]/python3-pip}")
fi
pkgs=()
for pkg in "${missing[@]}"; do [ -n "$pkg" ] && pkgs+=("$pkg"); done
if [ ${#pkgs[@]} -gt 0 ]; then
  echo "installing: ${pkgs[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
fi
if ! command -v swift >/dev/null; then
  echo "swift is not on PATH: install the Swift 6.x toolchain (https://www.swift.org/install/linux/)" >&2
  exit 1
fi
