#!/usr/bin/env bash
# Debian's real Prometheus against two runloopd instances sharing a real
# PostgreSQL (issue 28), plus checks of the shipped deploy/ files.
#   bash Tests/prometheus/run.sh path/to/runloopd [pytest args]   (or RUNLOOPD_BIN=...)
# Installs prometheus (apt: /usr/bin/prometheus and promtool), pytest and
# PyYAML when missing, then runs pytest under scripts/with-postgres.sh, whose
# second cluster (RUNLOOPD_TEST_POSTGRES_OUTAGE_*) the test stops and starts.
set -euo pipefail

# shellcheck source=../../scripts/lib/test-env.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/test-env.sh" "$@"
set -- "${args[@]}"

if ! command -v prometheus >/dev/null 2>&1 || ! command -v promtool >/dev/null 2>&1; then
  apt_install --no-install-recommends prometheus
fi
python3 -c 'import pytest' >/dev/null 2>&1 || pip_install pytest
python3 -c 'import yaml' >/dev/null 2>&1 || pip_install pyyaml

export RUNLOOPD_BIN="$bin"
mkdir -p "$root/.build/artifacts"
export ARTIFACTS_DIR="$root/.build/artifacts"
cd "$root"
start=$(date +%s.%N)
status=0
bash "$root/scripts/with-postgres.sh" python3 -m pytest -q -p no:cacheprovider "$here" "$@" || status=$?
end=$(date +%s.%N)
python3 -c "print('prometheus suite: %.1f s' % ($end - $start))"
exit $status
