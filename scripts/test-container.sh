#!/usr/bin/env bash
# Proves the Dockerfile's runtime stage without a Docker engine:
#   1. builds the release binary with the Dockerfile's command (make release);
#   2. debootstraps a minimal bookworm root holding ONLY the runtime packages the
#      Dockerfile installs (its RUNTIME_PACKAGES argument), cached under .build/;
#   3. installs the binary, Public/ and the non-root user as the Dockerfile does;
#   4. runs runloopd inside the root (chroot) as that user and checks /healthz,
#      one API round trip, the healthcheck subcommand, and a clean SIGTERM exit.
# A shared library missing from the root makes the binary fail to start: FAIL.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/sbin:/usr/sbin:/sbin:$PATH"
[ "$(id -u)" -eq 0 ] || { echo "test-container needs root (debootstrap, chroot)" >&2; exit 1; }

packages=$(sed -n 's/^ARG RUNTIME_PACKAGES="\(.*\)"/\1/p' Dockerfile)
[ -n "$packages" ] || { echo "no RUNTIME_PACKAGES in Dockerfile" >&2; exit 1; }
uid=$(sed -n 's/.*--uid \([0-9]*\).*/\1/p' Dockerfile | head -1)
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
root=.build/container-root
stamp="$root/.runloopd-packages"
started=$(date +%s)

command -v debootstrap >/dev/null || {
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null
}

echo "== release build (the Dockerfile's command: make release)"
make release >/dev/null

if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$packages" ]; then
  echo "== debootstrap --variant=minbase bookworm + $packages"
  rm -rf "$root"
  debootstrap --variant=minbase --include="${packages// /,}" bookworm "$root" "$mirror" >"$root.log" 2>&1 \
    || { tail -20 "$root.log"; exit 1; }
  echo "$packages" >"$stamp"
fi

echo "== install binary, Public/, user $uid (as the Dockerfile does)"
install -D -m 0755 .build/release/runloopd "$root/usr/local/bin/runloopd"
rm -rf "$root/srv/runloopd" && mkdir -p "$root/srv/runloopd" && cp -r Public "$root/srv/runloopd/Public"
chroot "$root" getent passwd runloopd >/dev/null \
  || chroot "$root" useradd --system --uid "$uid" --user-group --no-create-home --shell /usr/sbin/nologin runloopd

mounted=""
server=""
cleanup() {
  [ -n "$server" ] && kill -KILL "$server" 2>/dev/null || true
  [ -n "$mounted" ] && umount "$root/proc" 2>/dev/null || true
}
trap cleanup EXIT
mount -t proc proc "$root/proc" && mounted=1

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
echo "== run as uid $uid on 127.0.0.1:$port"
chroot --userspec="$uid:$uid" "$root" /usr/local/bin/runloopd serve --host 127.0.0.1 --port "$port" \
  --public-dir /srv/runloopd/Public >"$root.server.log" 2>&1 &
server=$!

fail() { echo "FAIL: $*"; echo "--- server log"; cat "$root.server.log"; exit 1; }
deadline=$((SECONDS + 20))
until curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; do
  kill -0 "$server" 2>/dev/null || fail "runloopd exited at start (a missing shared library?)"
  [ $SECONDS -lt $deadline ] || fail "no /healthz within 20 s"
  # wait on the process for a moment instead of sleeping blind
  timeout 0.1 tail --pid="$server" -f /dev/null || true
done
passed=0
check() { if "$@"; then passed=$((passed + 1)); else fail "$*"; fi; }
check curl -fsS "http://127.0.0.1:$port/healthz" -o /dev/null
created=$(curl -fsS -X POST -H 'Content-Type: application/json' -d '{"run":{"style":"manual"},"keepAlive":"none"}' \
  "http://127.0.0.1:$port/api/threads")
tid=$(printf '%s' "$created" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
run=$(curl -fsS -X POST -H 'Content-Type: application/json' -d '{"seconds":0.1}' \
  "http://127.0.0.1:$port/api/threads/$tid/run")
check test "$(printf '%s' "$run" | python3 -c 'import json,sys; print(json.load(sys.stdin)["exitReason"])')" = finished
check curl -fsS "http://127.0.0.1:$port/" -o /dev/null
check chroot --userspec="$uid:$uid" "$root" /usr/local/bin/runloopd healthcheck --port "$port"
if chroot --userspec="$uid:$uid" "$root" /usr/local/bin/runloopd healthcheck --port 1 2>/dev/null; then
  fail "healthcheck passed against a closed port"
fi
passed=$((passed + 1))
kill -TERM "$server"
rc=0; wait "$server" || rc=$?
server=""
check test "$rc" -eq 0
echo "container runtime: $passed passed, 0 failed ($(( $(date +%s) - started )) s)"
