# Sourced by the test runners: resolves the runloopd binary from "$1" or
# RUNLOOPD_BIN into $bin (absolute) and drops it from the arguments in $args.
#   . scripts/lib/runloopd-bin.sh; resolve_runloopd_bin "$@"; set -- "${args[@]}"
resolve_runloopd_bin() {
  bin="${1:-${RUNLOOPD_BIN:-}}"
  args=("$@")
  [ $# -gt 0 ] && args=("${@:2}")
  if [ -z "$bin" ]; then
    echo "usage: $0 path/to/runloopd [pytest args...]   (or set RUNLOOPD_BIN)" >&2
    exit 2
  fi
  case "$bin" in /*) ;; *) bin="$PWD/$bin" ;; esac
  if [ ! -x "$bin" ]; then
    echo "$0: $bin is not an executable runloopd (build it first)" >&2
    exit 2
  fi
}
