#!/usr/bin/env bash
# Builds the benchmarks (release), runs them and writes BENCHMARKS.md.
#   benchmarks/run.sh                      every benchmark (what `make bench` runs)
#   benchmarks/run.sh wakeup timers        a subset (BENCHMARKS.md keeps the others' last results)
#   benchmarks/run.sh callgrind            instructions per request under valgrind
#   benchmarks/run.sh many                 1,000 threads: paged list, scoped stream, RSS per worker
#   benchmarks/run.sh browser              the dashboard at 1,000 busy loops in headless Chromium
# Environment: BENCH_OUT (results folder), BENCH_REPORT (report path).
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
SCRATCH=benchmarks/.build
OUT=${BENCH_OUT:-$SCRATCH/results}
REPORT=${BENCH_REPORT:-BENCHMARKS.md}
SWIFT=${SWIFT:-swift}
benches=("$@")
[ ${#benches[@]} -eq 0 ] && benches=(hop callgrind wakeup trace store timers idle scale many browser)

# wrk (Debian) for the HTTP hop; libmicrohttpd-dev for the bare baseline.
need=()
command -v wrk >/dev/null || need+=(wrk)
dpkg-query -W -f='${Status}' libmicrohttpd-dev 2>/dev/null | grep -q "install ok installed" || need+=(libmicrohttpd-dev)
command -v pkg-config >/dev/null || need+=(pkg-config)
command -v valgrind >/dev/null || need+=(valgrind)
command -v chromium >/dev/null || need+=(chromium)
command -v chromedriver >/dev/null || need+=(chromium-driver)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

echo "== building (release): rlbench, runloopd, bare-mhd/hello.c, bare-mhd/minimal-hop.c"
$SWIFT build -c release --package-path benchmarks --scratch-path "$SCRATCH" --product rlbench
$SWIFT build -c release --package-path benchmarks --scratch-path "$SCRATCH" --product runloopd
BIN=$($SWIFT build -c release --package-path benchmarks --scratch-path "$SCRATCH" --show-bin-path)
cc -O2 -Wall -o "$SCRATCH/hello" benchmarks/bare-mhd/hello.c $(pkg-config --cflags --libs libmicrohttpd)
# The run-loop baseline: CoreFoundation from the Swift toolchain (its headers;
# the CF symbols are exported by libFoundation.so).
SWIFT_LIB=${SWIFT_LIB:-$(dirname "$(readlink -f "$(command -v "$SWIFT")")")/../lib/swift}
cc -O2 -Wall -o "$SCRATCH/minimal-hop" benchmarks/bare-mhd/minimal-hop.c -I"$SWIFT_LIB" \
  $(pkg-config --cflags --libs libmicrohttpd) "$SWIFT_LIB/linux/libFoundation.so" -Wl,-rpath,"$SWIFT_LIB/linux" -lpthread
mkdir -p "$OUT"
python3 -c 'import selenium' >/dev/null 2>&1 || python3 -m pip install -q --disable-pip-version-check selenium \
  || python3 -m pip install -q --disable-pip-version-check --break-system-packages selenium
echo "== load average before: $(cut -d' ' -f1-3 /proc/loadavg) (figures are cleanest below 1.0)"

for bench in "${benches[@]}"; do
  echo
  case "$bench" in
    trace)  "$BIN/rlbench" trace --runloopd "$BIN/runloopd" --out "$OUT" ;;
    hop)    "$BIN/rlbench" hop --runloopd "$BIN/runloopd" --hello "$SCRATCH/hello" --minimal-hop "$SCRATCH/minimal-hop" --out "$OUT" ;;
    scale)  "$BIN/rlbench" scale --runloopd "$BIN/runloopd" --out "$OUT" ;;
    many)   "$BIN/rlbench" many --runloopd "$BIN/runloopd" --out "$OUT" ;;
    store)  "$BIN/rlbench" store --runloopd "$BIN/runloopd" --out "$OUT" ;;
    callgrind) python3 benchmarks/callgrind/per-request.py "$SCRATCH" --section "$OUT/callgrind.json" ;;
    browser) python3 benchmarks/browser/page.py "$BIN/runloopd" --section "$OUT/browser.json" --screenshot "$OUT/dash-1000.png" ;;
    wakeup|timers|idle) "$BIN/rlbench" "$bench" --out "$OUT" ;;
    *) echo "unknown benchmark: $bench" >&2; exit 2 ;;
  esac 2>&1 | tee "$OUT/$bench.log"
done

total=$(( $(date +%s) - started ))
"$BIN/rlbench" report --out "$OUT" --to "$REPORT" --total "$total"
echo
echo "== goals ($total s in all)"
for bench in "${benches[@]}"; do grep -hE '^\s+\[(PASS|FAIL)\]' "$OUT/$bench.log" | sed "s/^ */$bench: /" || true; done
