#!/usr/bin/env bash
# Hardening suite of issue 7 against the real binary: API fuzzing
# (schemathesis), protocol abuse, slowloris + a 10,000-connection flood with a
# latency probe, faults inside loops, churn, shutdown under load, (issue 12)
# Host and Origin attacks, and (issue 22) the attack findings of test_08.
#   bash Tests/hardening/run.sh path/to/runloopd [pytest args...]
# Installs pytest, requests and schemathesis (pip) only when missing. Each test
# starts its own runloopd on a free 127.0.0.1 port (--port 0 --port-file) and
# stops it with SIGTERM (--drain-delay 0: it must exit 0 within 5 s). Every server is watched by
# a liveness prober from 127.0.0.3 (/healthz and /api/version every 100 ms): a
# gap over HARDENING_LIVENESS_GAP_S between answers fails the test with gdb
# backtraces of the server's threads. The fuzzer draws a fresh seed each run
# (printed; a failing one is appended to Tests/hardening/failed-seeds.txt,
# whose seeds are all replayed) while SSE clients resume with Last-Event-ID and
# stalled readers overflow their streams around it. Figures go to the end of
# the output and to .build/hardening/results.json. Knobs (defaults):
#   HARDENING_FUZZ_SECONDS=150 HARDENING_FUZZ_EXAMPLES=25 HARDENING_FUZZ_WORKERS=4
#   HARDENING_FUZZ_SEED=(random) HARDENING_FUZZ_SEED_SECONDS=30 (per kept seed)
#   HARDENING_STORM_LOOPS=3 (busy loops with observers and 5 ms timers)
#   HARDENING_LIVENESS_GAP_S=2 HARDENING_SLOW_HEADERS_SECONDS=15
#   HARDENING_FLOOD_ATTEMPTS=10000 HARDENING_PROBE_BUDGET_MS=100
#   HARDENING_CHURN_WORKERS=10000 HARDENING_CHURN_TIMERS=20000
set -euo pipefail

# shellcheck source=../../scripts/lib/test-env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/test-env.sh" "$@"
set -- "${args[@]}"

missing=()
python3 -c 'import pytest' 2>/dev/null || missing+=(pytest)
python3 -c 'import requests' 2>/dev/null || missing+=(requests)
python3 -c 'import schemathesis' 2>/dev/null || missing+=(schemathesis)
[ ${#missing[@]} -eq 0 ] || pip_install "${missing[@]}"

# Many sockets at once (slowloris, the flood, 1,088 slow headers): raise our own descriptor limit.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

mkdir -p "$root/.build/hardening"
started=$(date +%s)
cd "$here"
status=0
RUNLOOPD_BIN="$bin" HARDENING_RESULTS="$root/.build/hardening/results.json" \
  python3 -m pytest -q -p no:cacheprovider -o console_output_style=classic \
  --basetemp="$root/.build/hardening/tmp" "${@:-.}" || status=$?
echo "run.sh: hardening suite took $(( $(date +%s) - started )) s (exit $status)"
exit $status
