#!/usr/bin/env bash
# Browser tests of the dashboard (Public/) in Debian's headless Chromium.
#   bash Tests/browser/run.sh path/to/runloopd   (or RUNLOOPD_BIN=... bash Tests/browser/run.sh)
# Installs chromium, chromium-driver, selenium and pytest when missing (quietly),
# starts runloopd on a free loopback port with --public-dir Public, runs pytest,
# stops the server. Extra arguments after the binary go to pytest.
# Screenshots: .build/artifacts/dashboard-1280.png, dashboard-390.png.
set -euo pipefail

# shellcheck source=../../scripts/lib/test-env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/test-env.sh" "$@"
set -- "${args[@]}"

# --- dependencies, only when missing ---------------------------------------
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v chromedriver >/dev/null 2>&1 || missing+=(chromium-driver)
[ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"
python3 -c 'import selenium' >/dev/null 2>&1 || pip_install selenium
python3 -c 'import pytest' >/dev/null 2>&1 || pip_install pytest

# --- server -------------------------------------------------------------------
mkdir -p "$root/.build/artifacts"
log="$root/.build/artifacts/runloopd-browser.log"
cd "$root"
# Its history store (SQLite) in a temporary folder: the history view has real rows.
data="$(mktemp -d)"
"$bin" --host 127.0.0.1 --port 0 --port-file "$data/port" --public-dir "$root/Public" --log-level warning \
  --drain-delay 0 --data-dir "$data" \
  --max-threads 1100 >"$log" 2>&1 &  # test_scale.py drives the thread table at 1,000 threads
server=$!
cleanup() {
  kill "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  rm -rf "$data"
}
trap cleanup EXIT INT TERM

# Ready when it says so (the port file, written once it accepts connections),
# however loaded the machine: waited for while it runs; the deadline only
# catches a start that hangs (issue 41).
deadline=$(($(date +%s) + ${RUNLOOPD_START_DEADLINE:-300}))
until [ -s "$data/port" ]; do
  if ! kill -0 "$server" 2>/dev/null; then
    echo "run.sh: runloopd exited at start:" >&2
    cat "$log" >&2
    exit 1
  fi
  if [ "$(date +%s)" -ge "$deadline" ]; then
    echo "run.sh: runloopd did not start within ${RUNLOOPD_START_DEADLINE:-300} s:" >&2
    cat "$log" >&2
    exit 1
  fi
  sleep 0.05
done
port="$(cat "$data/port")"

export RUNLOOPD_URL="http://127.0.0.1:$port"
export RUNLOOPD_BIN="$bin"  # tests that need a second runloopd (on ::1) start this one
export ARTIFACTS_DIR="$root/.build/artifacts"
start=$(date +%s.%N)
status=0
python3 -m pytest -q -p no:cacheprovider "$here" "$@" || status=$?
end=$(date +%s.%N)
python3 -c "print('browser suite: %.1f s' % ($end - $start))"
exit $status
