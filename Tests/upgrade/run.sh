#!/usr/bin/env bash
# A mixed-version fleet on one real PostgreSQL (issue 40): the previous
# release's runloopd, built from git into its own scratch folder, and this
# one, upgraded and rolled back instance by instance; nothing they answered
# is missing from the history afterwards.
#   bash Tests/upgrade/run.sh path/to/runloopd [pytest args]   (make test-upgrade)
# RUNLOOPD_PREVIOUS: the git revision of the previous release (default
# 1a429af, 0.1.0). Its binary is built once into .build/previous/<rev>/ with
# `swift build --scratch-path` (its dependencies from this clone's checkouts:
# no network) and kept there. A few minutes the first time, ~1 minute after.
set -euo pipefail

# shellcheck source=../../scripts/lib/test-env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/test-env.sh" "$@"
set -- "${args[@]}"

previous="${RUNLOOPD_PREVIOUS:-1a429af}"
scratch="$root/.build/previous/$previous"
if [ ! -x "$scratch/runloopd" ]; then
  echo "run.sh: building runloopd $previous into $scratch" >&2
  rm -rf "$scratch/src"
  mkdir -p "$scratch/src" "$scratch/build"
  git -C "$root" archive "$previous" | tar -x -C "$scratch/src"
  # The same dependencies as this clone resolved (the previous release pins the same or older).
  [ -f "$scratch/src/Package.resolved" ] || cp "$root/Package.resolved" "$scratch/src/" 2>/dev/null || true
  for cache in repositories checkouts; do
    if [ -d "$root/.build/$cache" ] && [ ! -d "$scratch/build/$cache" ]; then
      cp -a "$root/.build/$cache" "$scratch/build/$cache"
    fi
  done
  (cd "$scratch/src" && ${SWIFT:-swift} build --skip-update --scratch-path "$scratch/build" --product runloopd)
  cp "$scratch/build/debug/runloopd" "$scratch/runloopd"
fi

python3 -c 'import pytest' >/dev/null 2>&1 || pip_install pytest
export RUNLOOPD_BIN="$bin" RUNLOOPD_PREVIOUS_BIN="$scratch/runloopd" RUNLOOPD_PREVIOUS="$previous"
export ARTIFACTS_DIR="$root/.build/artifacts"
mkdir -p "$ARTIFACTS_DIR"
cd "$root"
bash "$root/scripts/with-postgres.sh" python3 -m pytest -q -p no:cacheprovider "$here" "$@"
