# Sourced by the Tests/*/run.sh suites, with the suite's arguments:
#   . "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/test-env.sh" "$@"
#   set -- "${args[@]}"
# Sets $here (the suite's folder), $root (the repository), $bin (the runloopd
# binary, from "$1" or RUNLOOPD_BIN) and $args (the rest: pytest's), and
# defines apt_install and pip_install for dependencies that are missing.
here="$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
# shellcheck source=runloopd-bin.sh
. "$root/scripts/lib/runloopd-bin.sh"
resolve_runloopd_bin "$@"

# apt_install [--apt-option...] package...: quietly, with sudo unless root;
# refreshes the package lists once if the first attempt fails.
apt_install() {
  local sudo="" arg options=() packages=()
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  for arg in "$@"; do
    case "$arg" in -*) options+=("$arg") ;; *) packages+=("$arg") ;; esac
  done
  echo "run.sh: installing ${packages[*]} (apt)" >&2
  if ! $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${options[@]}" "${packages[@]}" >/dev/null 2>&1; then
    $sudo apt-get update -qq >/dev/null 2>&1
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${options[@]}" "${packages[@]}" >/dev/null
  fi
}

# pip_install package...: quietly; on an externally managed Python too.
pip_install() {
  echo "run.sh: installing $* (pip)" >&2
  python3 -m pip install -q --disable-pip-version-check "$@" >/dev/null 2>&1 \
    || python3 -m pip install -q --disable-pip-version-check --break-system-packages "$@" >/dev/null
}
