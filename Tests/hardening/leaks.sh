#!/usr/bin/env bash
# Leak check of issue 7 with LeakSanitizer (the ASan runtime shipped with the
# Swift toolchain; Debian's libclang-rt-14-dev is not needed):
#   1. builds the package and its tests with -sanitize=address (.build-asan),
#   2. runs the RunLoopCore tests (Swift Testing) under LeakSanitizer,
#   3. runs the sanitized runloopd through leak_workload.py (every object kind,
#      then SIGTERM) and checks LeakSanitizer's report at exit.
# Fails on any leak report. lsan.supp explains the one suppression.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
scratch="${ASAN_SCRATCH:-$root/.build-asan}"
out="$root/.build/hardening"
mkdir -p "$out"
cd "$root"
started=$(date +%s)
swift build --build-tests --scratch-path "$scratch" -Xswiftc -sanitize=address 2>&1 | tail -1
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1"
# The predict and phase differentials look for leaks here, not for timing
# disagreements (make test judges those): 200 generated loops, played as under
# ThreadSanitizer (E2E_SLOWDOWN: a few at a time), as a sanitized build on a
# busy machine plays most setups late otherwise.
export E2E_SLOWDOWN="${E2E_SLOWDOWN:-2}" PREDICT_SETUPS="${PREDICT_SETUPS:-200}"
export LSAN_OPTIONS="suppressions=$here/lsan.supp"

status=0
"$scratch/debug/runloopdPackageTests.xctest" --testing-library swift-testing --filter RunLoopCoreTests \
  > "$out/lsan-core.log" 2>&1 || status=$?
core_tests=$(grep -o 'Test run with [0-9]* tests' "$out/lsan-core.log" | grep -o '[0-9]*' || echo "?")
core_leaks=$(grep -c 'ERROR: LeakSanitizer' "$out/lsan-core.log" || true)
echo "leaks.sh: RunLoopCore tests under LeakSanitizer: $core_tests tests, exit $status, leak reports: $core_leaks"
[ "$status" -eq 0 ] && [ "$core_leaks" -eq 0 ] || { tail -80 "$out/lsan-core.log"; exit 1; }

python3 "$here/leak_workload.py" "$scratch/debug/runloopd" | tee "$out/lsan-server.log"
echo "leaks.sh: took $(( $(date +%s) - started )) s"
