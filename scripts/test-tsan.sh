#!/usr/bin/env bash
# ThreadSanitizer over the whole Swift suite (engine, HTTP, end to end).
# Fails on any report, even if every test passed.
set -euo pipefail
cd "$(dirname "$0")/.."
SWIFT="${SWIFT:-swift}"
scratch=.build-tsan
"$SWIFT" build --build-tests --sanitize=thread --scratch-path "$scratch"
log="$scratch/tsan-test.log"
set +e
# The predictor's differential test looks for races in the engine here, not
# timing disagreements (make test plays its 1,000): 200 generated loops.
# A server built with ThreadSanitizer starts several times slower, and the
# suite starts dozens at once on 2 cores: each gets 90 s to listen.
# As in make test, the predictor's tests run after the rest, on their own:
# beside dozens of servers many generated runs are played late (one run had
# 43 of 236), and the test then refuses to judge.
# The list is the Makefile's (PREDICT_TESTS), passed by `make test-tsan` or read from it.
predict="${PREDICT_TESTS:-$(sed -n 's/^PREDICT_TESTS := //p' Makefile)}"
[ -n "$predict" ] || { echo "test-tsan.sh: no PREDICT_TESTS in Makefile" >&2; exit 2; }
# At most 8 tests at a time (swift-testing's SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH):
# all at once, on 2 cores under ThreadSanitizer, a test process once took 4
# minutes between two requests of one test and every test ran ~480 s.
export SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH="${SWT_EXPERIMENTAL_MAXIMUM_PARALLELIZATION_WIDTH:-8}"
export E2E_SLOWDOWN="${E2E_SLOWDOWN:-4.5}" PREDICT_SETUPS="${PREDICT_SETUPS:-200}" TSAN_OPTIONS="halt_on_error=0 ${TSAN_OPTIONS:-}"
"$SWIFT" test --skip-build --sanitize=thread --scratch-path "$scratch" --skip "$predict" >"$log" 2>&1
status=$?
"$SWIFT" test --skip-build --sanitize=thread --scratch-path "$scratch" --filter "$predict" >>"$log" 2>&1
predict_status=$?
[ "$status" -ne 0 ] || status=$predict_status
set -e
tail -n 3 "$log"
reports=$(grep -c "WARNING: ThreadSanitizer" "$log" || true)
if [ "$reports" -ne 0 ]; then
  echo "ThreadSanitizer: $reports report(s); the first:" >&2
  grep -m1 -A40 "WARNING: ThreadSanitizer" "$log" >&2
  exit 1
fi
if [ "$status" -ne 0 ]; then
  grep -E "✘|error:" "$log" | head -40 >&2
  exit "$status"
fi
echo "ThreadSanitizer: no reports"
